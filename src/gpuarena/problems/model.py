"""The schema of problem.toml, as code (pydantic models double as JSON Schema)."""

from __future__ import annotations

import ast
import importlib.util
import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    import torch

DTYPES: dict[str, int] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}
"""The dtypes a problem's inputs and outputs may have (torch's names), with their bytes an element.
Names, not torch's objects: a server reads problem files without importing torch."""
DEVICE_KINDS: tuple[Literal["cpu", "cuda"], ...] = ("cpu", "cuda")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


OUTSIDE_CAP = 0.01
"""The largest share of elements a tolerance may let fall outside its elementwise bound."""


class Tolerance(Strict):
    """When an output counts as equal to the reference."""

    atol: float = Field(ge=0)
    """Elementwise absolute tolerance: |out - ref| <= atol + rtol * |ref|."""
    rtol: float = Field(ge=0)
    """Elementwise relative tolerance."""
    l2: float = Field(ge=0)
    """Bound on ||out - ref||_2 / ||ref||_2, so that outputs small everywhere cannot pass as zeros."""
    outside: float = Field(default=0.0, ge=0, le=OUTSIDE_CAP)
    """Share of an output's elements that may fall outside the elementwise bound (0: none). For
    reduced-precision fusions that amplify rounding in a few places (a decoder layer whose own
    float32 computation misses its bfloat16 reference on 1 element in 10,000): the L2 bound
    still holds over every element, and none may be NaN or Inf where the reference is finite.
    At most OUTSIDE_CAP; `gpuarena check` and the dataset derive it from the reference's own
    error (problem_check.py)."""


DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7, l2=1e-7),
    "float32": Tolerance(atol=1e-4, rtol=1e-4, l2=1e-4),
    "float16": Tolerance(atol=1e-2, rtol=1e-2, l2=5e-3),
    "bfloat16": Tolerance(atol=2e-2, rtol=2e-2, l2=1e-2),
}
EXACT = Tolerance(atol=0.0, rtol=0.0, l2=0.0)


class Workload(Strict):
    """One shape of the problem that solutions are judged on."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.\-]+$")
    """Short name shown in tables, unique within the problem."""
    axes: dict[str, int]
    """Named axis values, passed to make_inputs()."""
    dtype: str
    """Element type of the inputs (float32, bfloat16, ...)."""
    weight: float = Field(default=1.0, gt=0)
    """Weight of this workload in the problem's score (weighted geometric mean)."""
    devices: list[Literal["cpu", "cuda"]] = Field(default_factory=lambda: list(DEVICE_KINDS))
    """Device kinds this workload runs on; GPU-sized workloads say ["cuda"]."""
    timed: bool = True
    """False: judged for correctness only, in every mode, and never timed or scored. A peer's
    tests as its own evaluation uses them (GPU MODE's task.yml `tests`, which it checks and
    does not time): timing and auditing five tiny shapes took two thirds of a ranked verdict."""
    bytes: int | None = Field(default=None, ge=0)
    """This workload's minimum bytes moved, in place of the problem's formula: for a merged
    problem whose workloads no one formula over the axes covers (a size of 1 on other axes in
    each model's shapes), the figure traced for this workload (scripts/derive_traffic.py)."""
    flops: int | None = Field(default=None, ge=0)
    """This workload's floating-point operations, in place of the problem's formula (as bytes)."""

    @field_validator("dtype")
    @classmethod
    def _known_dtype(cls, value: str) -> str:
        if value not in DTYPES:
            raise ValueError(f"unknown dtype {value!r}; use one of {', '.join(DTYPES)}")
        return value

    @property
    def torch_dtype(self) -> torch.dtype:
        import torch  # here, not at the top: reading a problem needs no torch

        return cast("torch.dtype", getattr(torch, self.dtype))


class Provenance(Strict):
    """Where the operator and its shapes come from."""

    framework: str = "pytorch"
    """Framework the reference is written in."""
    operator: str = ""
    """The framework operator(s) it corresponds to."""
    models: list[str] = Field(default_factory=list)
    """Models the operator and shapes are taken from."""


class TimeLimits(BaseModel):
    """Seconds a whole run may take (start-up, build, trials, timing), per mode. An infinite loop
    holds a runner this long at most; the problem page and `gpuarena run` show them."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    test: float = Field(default=300.0, gt=0, le=3600)
    """Correctness trials only."""
    benchmark: float = Field(default=600.0, gt=0, le=3600)
    ranked: float = Field(default=600.0, gt=0, le=3600)


class ProblemSpec(Strict):
    """The contents of problem.toml."""

    name: str = Field(pattern=r"^[a-z0-9_\-]+$")
    """Short name; the problem's id is its folder path, e.g. level1/softmax."""
    level: Literal[1, 2, 3, 4]
    """1 single op · 2 fusion · 3 fusion with matrix multiply · 4 large-model inference fusion."""
    summary: str = Field(min_length=1)
    """One line saying what the operator computes."""
    tags: list[str] = Field(default_factory=list)
    weight: float = Field(default=1.0, ge=0)
    """Weight of the problem in the suite. In the dataset (`gpuarena dataset weigh`,
    docs/dataset.md): its share of the time of the model-phases it comes from, each op call
    counted once (0: every call it stands for is inside a kept fusion, or nothing claims it)."""
    level_weight: float | None = Field(default=None, ge=0)
    """Its weight among its own level's problems (the per-level scores): each level a view of
    the whole model at its granularity. None: not weighed (the per-level scores use `weight`)."""
    model_weights: dict[str, float] = Field(default_factory=dict)
    """Its share of each model-phase's time it comes from, by label (`llama-prefill`): the
    per-model scores. Empty: not weighed."""
    convention: Literal["return", "destination"] = "return"
    """"return": solve(...) returns outputs; "destination": solve(..., *outputs) writes into them."""
    outputs: list[str] = Field(default_factory=lambda: ["output"], min_length=1)
    """Output names, in the order reference() returns them."""
    checker: str | None = None
    """The name of a function in reference.py that judges a solution's outputs in place of
    closeness to the reference's, for answers that are not unique (a sort's order of equal
    keys, top-k with ties, any valid permutation): `check(inputs, outputs, expected)` gets the
    inputs by name and both sides' outputs as tuples (shapes and dtypes already equal) and
    returns '' or None (or True, or (True, message)) when the outputs are right, else what is
    wrong (a message, False, or (False, message)). Trusted code, run in the supervisor."""
    bytes: str | None = None
    """Minimum bytes moved by a workload: arithmetic over axis names and dtype_bytes."""
    flops: str | None = None
    """Floating-point operations of a workload: arithmetic over axis names and dtype_bytes."""
    provenance: Provenance = Field(default_factory=Provenance)
    tolerance: dict[str, Tolerance] = Field(default_factory=dict)
    """Per-dtype overrides of the default tolerances."""
    faithful_dtypes: list[str] = Field(default_factory=list)
    """Dtypes whose math must be as accurate as the reference's (e.g. ["float32"]: no TF32, no
    lower-precision accumulation): a solution's error against a float64 computation may be at
    most a small multiple of the reference's own (harness/precision.py), whatever the
    elementwise tolerance allows."""
    requires: list[str] = Field(default_factory=list)
    """Python packages (top-level import names) the reference needs beyond gpuarena's own, as
    GPU MODE's AMD tasks need `aiter`: where one is missing, `gpuarena check` and `gpuarena run`
    stop naming it before anything of the problem is imported (missing_packages), so the
    problem is kept whole where it cannot run instead of failing there unexplained."""
    seeded_calls: bool = False
    """The reference draws from torch's global generator while it runs (dropout, torch.randn in a
    forward): the harness seeds torch's generators before every call, of the reference and of the
    solution alike, with the seed of the input set the call is on, so a solution that draws the
    same numbers the same way gets the same outputs. (KernelBench's eval seeds once before the
    reference's forward, so a solution's draws follow the reference's and none can match.)"""
    tolerance_as_stated: str | None = None
    """The peer whose tolerance (or checker) the problem keeps exactly as its task states it
    ("GPU MODE"): its verdicts then match the peer's. Where honest rounding would fail that
    tolerance, `gpuarena check` reports it instead of refusing the problem."""
    time_limits: TimeLimits = Field(default_factory=lambda: TimeLimits())
    """The longest a whole run may take, per mode, build included; a runner may set a lower cap."""
    unchecked: list[str] = Field(default_factory=list)
    """Device types ("cuda", ...) on which the problem has not passed `gpuarena check` yet: an
    importer wrote it where none of its workloads could run. Its first run on such a device
    checks it before judging anything, once per machine (problem_pending.py)."""
    workloads: list[Workload] = Field(min_length=1)

    @field_validator("bytes", "flops")
    @classmethod
    def _parse_formula(cls, value: str | None) -> str | None:
        if value is not None:
            check_formula(value)
        return value

    @field_validator("tolerance")
    @classmethod
    def _tolerance_dtypes(cls, value: dict[str, Tolerance]) -> dict[str, Tolerance]:
        for key in value:
            if key not in DTYPES:
                raise ValueError(f"tolerance for unknown dtype {key!r}; use one of {', '.join(DTYPES)}")
        return value

    @field_validator("faithful_dtypes")
    @classmethod
    def _faithful_dtypes(cls, value: list[str]) -> list[str]:
        for key in value:
            if key not in ("float32", "float16", "bfloat16", "float64"):
                raise ValueError(
                    f"faithful_dtypes names {key!r}; use floating dtypes (float32, float16, bfloat16, float64)"
                )
        return value

    @field_validator("requires")
    @classmethod
    def _package_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name.isidentifier():
                raise ValueError(f"requires names {name!r}; give top-level import names (aiter, triton)")
        return value

    def missing_packages(self) -> list[str]:
        """The packages of `requires` this Python cannot find, in order (nothing is imported)."""
        missing = []
        for name in self.requires:
            try:
                found = importlib.util.find_spec(name) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                missing.append(name)
        return missing

    def faithful(self, dtype: str) -> bool:
        """Whether this dtype's workloads must use math as accurate as the reference's."""
        return dtype in self.faithful_dtypes

    @model_validator(mode="after")
    def _consistent(self) -> ProblemSpec:
        names = [w.name for w in self.workloads]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"workload names must be unique; repeated: {', '.join(duplicated)}")
        if len(set(self.outputs)) != len(self.outputs):
            raise ValueError("output names must be unique")
        for formula in (self.bytes, self.flops):
            if formula is None:
                continue
            for w in self.workloads:
                evaluate_formula(formula, {**w.axes, "dtype_bytes": 4})
        return self

    def time_limit_for(self, mode: str) -> float:
        return float(getattr(self.time_limits, mode, self.time_limits.ranked))

    def tolerance_for(self, dtype: str) -> Tolerance:
        if dtype in self.tolerance:
            return self.tolerance[dtype]
        return DEFAULT_TOLERANCES.get(dtype, EXACT)

    def workloads_for(self, device_kind: str) -> list[Workload]:
        return [w for w in self.workloads if device_kind in w.devices]

    def cost(self, workload: Workload) -> tuple[float | None, float | None]:
        """(bytes, flops) of a workload: its own figures where it has them, else the problem's
        formulas where it gives them."""
        names = {**workload.axes, "dtype_bytes": DTYPES[workload.dtype]}
        moved = evaluate_formula(self.bytes, names) if self.bytes else None
        flops = evaluate_formula(self.flops, names) if self.flops else None
        return (
            moved if workload.bytes is None else float(workload.bytes),
            flops if workload.flops is None else float(workload.flops),
        )


def unmet_requirements(problem: str, missing: list[str]) -> str:
    """The one line `gpuarena check` and `gpuarena run` stop with where a package the problem
    requires (ProblemSpec.requires) is not installed: no verdict on any solution."""
    listed = ", ".join(f"`{name}`" for name in missing)
    return (
        f"{problem} requires {listed} (problem.toml `requires`), not installed here: nothing of the "
        f"problem was run; run it on a machine where {listed} {'is' if len(missing) == 1 else 'are'} installed"
    )


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


def check_formula(text: str) -> ast.Expression:
    """Parse a bytes/flops formula; only + - * / // % ** over names and numbers."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"formula {text!r} is not valid arithmetic: {exc.msg}") from None
    for node in ast.walk(tree):
        allowed = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub, ast.UAdd, ast.Name, ast.Load, ast.Constant)
        if not isinstance(node, allowed + tuple(_OPS)):
            raise ValueError(f"formula {text!r} may only use numbers, axis names and + - * / // % **")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise ValueError(f"formula {text!r} may only contain numbers")
    return tree


def evaluate_formula(text: str, names: Mapping[str, float]) -> float:
    """Evaluate a checked formula with the given axis values."""

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant):
            return cast(float, node.value)  # check_formula lets only int and float constants through
        if isinstance(node, ast.Name):
            if node.id not in names:
                known = ", ".join(sorted(names))
                raise ValueError(f"formula {text!r} uses unknown name {node.id!r}; known: {known}")
            return names[node.id]
        if isinstance(node, ast.UnaryOp):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"formula {text!r}: unsupported expression")

    return float(walk(check_formula(text)))
