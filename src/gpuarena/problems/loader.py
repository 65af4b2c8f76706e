"""Loading problem folders: problem.toml validated into a ProblemSpec, reference.py imported."""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pydantic
from pydantic_core import ErrorDetails

from gpuarena.bundled import PROBLEM_FILE, bundled_root
from gpuarena.errors import FormatError
from gpuarena.problems.model import ProblemSpec

REFERENCE_FILE = "reference.py"


@dataclass
class Problem:
    """A loaded problem: its spec, its folder and its trusted reference code."""

    id: str
    """The folder path relative to the problem root, e.g. level1/softmax."""
    path: Path
    spec: ProblemSpec
    reference_source: str
    _module: ModuleType | None = field(default=None, repr=False)

    @property
    def module(self) -> ModuleType:
        if self._module is None:
            self._module = _import_reference(self.path / REFERENCE_FILE)
        return self._module

    @property
    def reference(self) -> Callable[..., Any]:
        """The reference as the harness calls it: torch tensors in, torch tensors out. A reference
        written in JAX (provenance.framework = "jax") is called through DLPack (jax_bridge)."""
        if self.spec.provenance.framework == "jax":
            from gpuarena.jax_bridge import torch_facing

            return torch_facing(self.module.reference)
        return self.module.reference

    @property
    def checker(self) -> Callable[..., Any] | None:
        """The problem's own checker (ProblemSpec.checker), or None: closeness to the reference."""
        if self.spec.checker is None:
            return None
        found = getattr(self.module, self.spec.checker, None)
        if not callable(found):
            raise ValueError(
                f"problem {self.id}: problem.toml names checker {self.spec.checker!r}, "
                f"which reference.py does not define as a function"
            )
        return found

    @property
    def make_inputs(self) -> Callable[..., dict[str, Any]]:
        return self.module.make_inputs

    @property
    def input_names(self) -> list[str]:
        return list(inspect.signature(self.reference).parameters)

    @property
    def readme(self) -> str:
        readme = self.path / "README.md"
        return readme.read_text() if readme.exists() else ""


def _import_reference(path: Path) -> ModuleType:
    name = f"gpuarena_reference_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules.pop(name, None)
        raise FormatError(path, None, f"importing it failed: {type(exc).__name__}: {exc}") from exc
    for required in ("reference", "make_inputs"):
        if not callable(getattr(module, required, None)):
            raise FormatError(
                path, required, f"no function {required}() defined", f"define {required}(...) as docs/formats.md shows"
            )
    params = inspect.signature(module.make_inputs).parameters
    if len(params) != 4:
        raise FormatError(path, "make_inputs", "must take (axes, dtype, device, generator)", "use that signature")
    return module


def _field_path(loc: tuple[Any, ...], data: dict[str, Any]) -> str:
    """Turn a pydantic location into a TOML path a person can find: workloads[1].dtype."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts[-1] = f"{parts[-1]}[{item}]" if parts else f"[{item}]"
        else:
            parts.append(str(item))
    return ".".join(parts)


def _fix_for(error: ErrorDetails) -> str:
    kind = error["type"]
    if kind == "missing":
        return "add this field"
    if kind == "extra_forbidden":
        return "remove it or check its spelling against docs/formats.md"
    if kind.startswith("literal"):
        return f"use {error.get('ctx', {}).get('expected', 'an allowed value')}"
    return "see docs/formats.md"


def load_spec(folder: Path) -> ProblemSpec:
    toml_path = folder / PROBLEM_FILE
    if not toml_path.is_file():
        raise FormatError(toml_path, None, "not found", f"a problem folder needs {PROBLEM_FILE} and {REFERENCE_FILE}")
    try:
        data = tomllib.loads(toml_path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(toml_path, None, f"is not valid TOML: {exc}", "fix the syntax at that line") from None
    try:
        return ProblemSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ") + more
        raise FormatError(toml_path, _field_path(first["loc"], data) or None, message, _fix_for(first)) from None


def load_problem(folder: Path | str, root: Path | None = None) -> Problem:
    """Load and validate a problem folder; the reference is imported lazily."""
    folder = Path(folder).resolve()
    spec = load_spec(folder)
    reference = folder / REFERENCE_FILE
    if not reference.is_file():
        raise FormatError(reference, None, "not found", "write reference() and make_inputs() there")
    if root is None:
        root = folder.parent.parent if folder.parent.name.startswith("level") else folder.parent
    try:
        problem_id = folder.relative_to(root.resolve()).as_posix()
    except ValueError:
        problem_id = folder.name
    return Problem(id=problem_id, path=folder, spec=spec, reference_source=reference.read_text())


def resolve_problem(name: str | Path) -> Problem:
    """A problem by folder path, or by the id of a bundled problem (level1/softmax)."""
    path = Path(name)
    if (path / PROBLEM_FILE).is_file():
        return load_problem(path)
    bundled = bundled_root() / str(name)
    if (bundled / PROBLEM_FILE).is_file():
        return load_problem(bundled, root=bundled_root())
    raise FormatError(
        name,
        None,
        "no problem folder here and no bundled problem by that id",
        "give a folder holding problem.toml, or an id from `gpuarena list`",
    )


def find_problem(name: str, near: Path, workloads: Iterable[str] = ()) -> Problem:
    """The problem a record names (its `problem`: a bundled id, a folder path, or a local
    folder's name, as `gpuarena run` wrote it): resolved as `resolve_problem` does, else the one
    problem folder below `near` whose path ends with it and that has every workload named."""
    try:
        return resolve_problem(name)
    except FormatError:
        pass
    parts, wanted = Path(name).parts, set(workloads)
    found: list[Problem] = []
    for folder, subfolders, files in os.walk(near):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in _NOT_PROBLEMS)
        if PROBLEM_FILE in files and Path(folder).parts[-len(parts) :] == parts:
            try:
                problem = load_problem(Path(folder))
            except FormatError:
                continue
            if wanted <= {w.name for w in problem.spec.workloads}:
                found.append(problem)
    if len(found) == 1:
        return found[0]
    where = (
        f"{len(found)} problem folders below {near} match it ({', '.join(str(p.path) for p in found)})"
        if found
        else f"no problem folder below {near} with that name has the record's workloads"
    )
    raise FormatError(name, None, f"not a bundled problem, and {where}", "give the problem's folder with --problem")


_NOT_PROBLEMS = {"node_modules", "__pycache__", "site-packages"}


def problem_folder(name: str | Path) -> Path | None:
    """The folder of a problem given as a folder path or as a bundled id; None if neither."""
    path = Path(name)
    if (path / PROBLEM_FILE).is_file():
        return path
    bundled = bundled_root() / str(name)
    return bundled if (bundled / PROBLEM_FILE).is_file() else None


def discover(root: Path | None = None) -> list[Problem]:
    """All problem folders under root (default: the bundled problems), sorted by id."""
    root = (root or bundled_root()).resolve()
    folders = sorted(p.parent for p in root.rglob(PROBLEM_FILE))
    return [load_problem(folder, root=root) for folder in folders]
