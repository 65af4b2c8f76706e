"""The `app.toml` format: what an application runs, which outputs are compared and how, and how
its performance figure is read. Checked here, once, so every later step can trust it; each
mistake is reported with the field it is in (see `load_app`)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpuarena.errors import GpuarenaError

APP_FILE = "app.toml"
_CONFIG = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class AppError(GpuarenaError):
    """An app folder or its app.toml is malformed; the message names the field."""


def _relative(value: str, what: str) -> str:
    """Paths in app.toml stay inside the folder they are relative to."""
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"{what} {value!r} must be a relative path inside the folder, without '..'")
    return value


class Exact(BaseModel):
    """Equal values: every element, line or JSON leaf."""

    model_config = _CONFIG
    kind: Literal["exact"]


class Tolerance(BaseModel):
    """Numbers equal within |got - expected| <= atol + rtol * |expected| (NaN matches NaN)."""

    model_config = _CONFIG
    kind: Literal["tolerance"]
    atol: float = Field(1e-5, ge=0)
    """Absolute tolerance."""
    rtol: float = Field(1e-5, ge=0)
    """Relative tolerance, relative to the golden value."""


class Tokens(BaseModel):
    """Token agreement: the share of equal positions (over the longer sequence) is at least
    `threshold`. Made for generated token ids or text (whitespace-split)."""

    model_config = _CONFIG
    kind: Literal["tokens"]
    threshold: float = Field(1.0, gt=0, le=1)
    """The least share of equal positions that counts as a match."""


class Metric(BaseModel):
    """One named figure against a threshold: max_abs and rel_l2 must be <= threshold, cosine
    (cosine similarity of the flattened tensors) >= threshold."""

    model_config = _CONFIG
    kind: Literal["metric"]
    name: Literal["max_abs", "rel_l2", "cosine"]
    """Which figure: max_abs = max |got - expected|, rel_l2 = ||got - expected|| / ||expected||,
    cosine = cosine similarity."""
    threshold: float = Field(ge=0)
    """The bound: an upper bound for max_abs and rel_l2, a lower bound for cosine."""


Comparison = Annotated[Exact | Tolerance | Tokens | Metric, Field(discriminator="kind")]

_ALLOWED: dict[str, set[str]] = {
    "tensor": {"exact", "tolerance", "tokens", "metric"},
    "text": {"exact", "tokens"},
    "json": {"exact", "tolerance", "tokens"},
}


class Output(BaseModel):
    """One output file the app writes into its output folder, and how it is compared with the
    golden one."""

    model_config = _CONFIG
    file: str
    """The file name, relative to the output folder ($GPUARENA_APP_OUTPUT)."""
    kind: Literal["tensor", "text", "json"]
    """tensor: .npy, .npz (numpy) or .pt (torch, loaded with weights_only=True); text: UTF-8;
    json: any JSON value."""
    compare: Comparison
    """The comparison: exact, tolerance, tokens or metric."""

    @field_validator("file")
    @classmethod
    def _file(cls, value: str) -> str:
        return _relative(value, "file")

    @model_validator(mode="after")
    def _fits(self) -> Output:
        if self.kind == "tensor" and not self.file.endswith((".npy", ".npz", ".pt")):
            raise ValueError(f"a tensor output must be a .npy, .npz or .pt file, not {self.file!r}")
        if self.compare.kind not in _ALLOWED[self.kind]:
            raise ValueError(
                f"compare kind {self.compare.kind!r} does not apply to a {self.kind} output; "
                f"use one of {', '.join(sorted(_ALLOWED[self.kind]))}"
            )
        return self


class Performance(BaseModel):
    """The app's performance figure and where to read it: a regex over stdout (its first group is
    the number) or a key of a JSON file in the output folder."""

    model_config = _CONFIG
    name: Literal["latency_ms", "tokens_per_s", "samples_per_s"]
    """What the figure is."""
    higher_is_better: bool | None = None
    """Whether more is better; by default False for latency_ms, True for the rates."""
    regex: str | None = None
    """A regular expression searched in stdout; its first group (or whole match) is the number."""
    json_file: str | None = None
    """A JSON file in the output folder holding the figure."""
    json_key: str | None = None
    """The figure's key in json_file; dots go into nested objects (e.g. "perf.tokens_per_s")."""

    @model_validator(mode="after")
    def _source(self) -> Performance:
        if (self.regex is None) == (self.json_file is None):
            raise ValueError("give exactly one of regex or json_file (with json_key)")
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"regex {self.regex!r} does not compile: {exc}") from None
        if self.json_file is not None:
            _relative(self.json_file, "json_file")
            if not self.json_key:
                raise ValueError("json_file needs json_key, the figure's key in that file")
        if self.higher_is_better is None:
            object.__setattr__(self, "higher_is_better", self.name != "latency_ms")
        return self


class Run(BaseModel):
    """How the app is started: a command, or a Python entry point "file.py:function" or
    "module:function" called with `args` (as strings; sys.argv is set to them too)."""

    model_config = _CONFIG
    command: list[str] | None = None
    """The command and its arguments; a first word "python" means the interpreter running gpuarena."""
    entry: str | None = None
    """A Python entry point: "app.py:main" (a file in the app folder) or "package.module:main"."""
    args: list[str] = []
    """Arguments for the entry point (with command, write them in the command itself)."""

    @model_validator(mode="after")
    def _one(self) -> Run:
        if (self.command is None) == (self.entry is None):
            raise ValueError("give exactly one of command or entry")
        if self.command is not None:
            if not self.command:
                raise ValueError("command must not be empty")
            if self.args:
                raise ValueError("args go with entry; put a command's arguments in the command list")
        if self.entry is not None and not re.fullmatch(r"[\w./-]+:[A-Za-z_]\w*", self.entry):
            raise ValueError(f'entry {self.entry!r} must read "file.py:function" or "module:function"')
        if self.entry is not None and self.entry.split(":")[0].endswith(".py"):
            _relative(self.entry.split(":")[0], "entry file")
        return self


class AppSpec(BaseModel):
    """An app.toml."""

    model_config = _CONFIG
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][\w.-]*$")
    """The app's name (letters, digits, _ . -)."""
    run: Run
    """How the app is started."""
    setup: list[list[str]] = []
    """Commands run once in the working folder before the runs (e.g. building an extension)."""
    outputs: list[Output] = Field(min_length=1)
    """The output files compared with the golden ones."""
    performance: Performance | None = None
    """The performance figure, if the app reports one."""
    time_limit_s: float = Field(60.0, gt=0)
    """The most seconds one run (or one setup command) may take; then its sandbox, and everything the
    app started in it, is killed (unsandboxed: its process group)."""
    seed: int = 0
    """Passed as $GPUARENA_APP_SEED; the app seeds its generators with it."""
    repeats: int = Field(3, ge=1, le=100)
    """How many times the app is run, for the performance figure's interval."""

    @field_validator("setup")
    @classmethod
    def _setup(cls, value: list[list[str]]) -> list[list[str]]:
        if any(not command for command in value):
            raise ValueError("a setup command must not be empty")
        return value

    @model_validator(mode="after")
    def _unique(self) -> AppSpec:
        files = [o.file for o in self.outputs]
        twice = sorted({f for f in files if files.count(f) > 1})
        if twice:
            raise ValueError(f"outputs name {', '.join(twice)} more than once")
        return self


def _where(loc: tuple[Any, ...]) -> str:
    """pydantic's error location as a field path: outputs[0].compare.atol (union tags dropped)."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif item in ("exact", "tolerance", "tokens", "metric") and parts and parts[-1].endswith("compare"):
            continue
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def parse_app(data: dict[str, Any], source: str = APP_FILE) -> AppSpec:
    """Validate app.toml's content; the first mistake is raised with its field path."""
    try:
        return AppSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = _where(tuple(first["loc"]))
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ")
        raise AppError(f"{source}: {where or 'top level'}: {message}{more}") from None


def load_app(folder: Path | str) -> AppSpec:
    """Read and check `folder/app.toml`."""
    path = Path(folder) / APP_FILE
    if not path.is_file():
        raise AppError(f"{path}: not found; an app folder needs an {APP_FILE} (see docs/migration.md)")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise AppError(f"{path}: not valid TOML: {exc}") from None
    return parse_app(data, str(path))


def with_repeats(spec: AppSpec, repeats: int | None) -> AppSpec:
    """The spec with `repeats` runs instead of its own (None: its own), checked as app.toml's is."""
    if repeats is None:
        return spec
    try:
        return AppSpec.model_validate({**spec.model_dump(), "repeats": repeats})
    except pydantic.ValidationError as exc:
        raise AppError(f"--repeats {repeats}: {exc.errors()[0]['msg']}") from None
