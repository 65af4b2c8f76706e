"""FlashInfer-Trace into gpuarena: a Definition and its workloads as a problem folder, a
Solution as a solution folder.

A problem imported from definition D is a folder holding

- `problem.toml`: one gpuarena workload per FlashInfer workload, named by its uuid, with the
  constant and variable axes' sizes and the dtype of D's outputs;
- `reference.py`: D's reference verbatim, then a marker line, then glue: `reference()` calls
  `run()` with D's inputs, `make_inputs()` draws each tensor input at its declared shape and
  dtype and passes each scalar input its value;
- `flashinfer.json`: D itself and the scalar inputs' values (the glue reads it, and
  `flashinfer_export.export_definition` gives D and its workloads back from it);
- `README.md`: D's description, axes, inputs and outputs.

Whatever D or its workloads need that gpuarena's problem format cannot carry is refused with
an `UnsupportedFeature` error naming the feature: the import never writes a problem that
differs from the definition.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import operator
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict

from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.interop.flashinfer_trace import (
    Definition,
    SafetensorsInput,
    ScalarInput,
    Solution,
    Trace,
    field_path,
    read_definition,
    read_solution,
    read_workloads,
)
from gpuarena.problems.loader import PROBLEM_FILE, REFERENCE_FILE, Problem, load_problem, load_spec
from gpuarena.problems.model import DTYPES
from gpuarena.solutions.loader import MANIFEST_FILE, load_solution
from gpuarena.solutions.model import unsafe_source_name

SIDECAR = "flashinfer.json"
"""The file in an imported problem or solution folder that keeps what gpuarena's own files cannot."""
PROBLEM_FORMAT = "gpuarena.flashinfer-definition/1"
SOLUTION_FORMAT = "gpuarena.flashinfer-solution/1"
REFERENCE_HEADER = "# gpuarena: the FlashInfer-Trace definition's reference, verbatim, down to the marker line below."
REFERENCE_END = "# ---- gpuarena: end of the FlashInfer-Trace reference ----"
ADAPTER_FILE = "flashinfer_adapter.py"
ADAPTER_HEADER = "# gpuarena: adapter written by `gpuarena import flashinfer-solution`; not part of the FlashInfer solution."
CPU_MAX_ELEMENTS = 1 << 24
"""A workload whose inputs and outputs hold at most this many elements in all runs on the CPU too."""
CPU_SMOKE = "cpu-smoke"
"""The name of the small CPU-only workload added when no FlashInfer workload is small enough."""
LANGUAGES = {"python": "pytorch", "triton": "triton", "cuda": "cuda"}
"""FlashInfer solution language -> gpuarena solution language."""
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_GLUE_NAMES = ("reference", "make_inputs")


class UnsupportedFeature(GpuarenaError):
    """The FlashInfer-Trace document needs something gpuarena's formats cannot carry yet."""

    def __init__(self, where: Path | str, feature: str, detail: str, target: str = "gpuarena's format"):
        self.where, self.feature, self.detail = str(where), feature, detail
        super().__init__(f"{where}: {target} cannot carry {feature} yet: {detail}")


class ProblemSidecar(BaseModel):
    """flashinfer.json in an imported problem folder."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    format: Literal["gpuarena.flashinfer-definition/1"] = PROBLEM_FORMAT
    definition: Definition
    """The FlashInfer-Trace definition, as imported."""
    scalars: dict[str, int | float | bool] = {}
    """Scalar input name -> its value (the same in every workload)."""
    cpu_smoke: str | None = None
    """The gpuarena-only CPU workload the import added, if any (never exported)."""


class SolutionSidecar(BaseModel):
    """flashinfer.json in an imported solution folder: the Solution's fields but its sources."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    format: Literal["gpuarena.flashinfer-solution/1"] = SOLUTION_FORMAT
    solution: dict[str, Any]
    """name, definition, author, description and spec of the FlashInfer Solution."""


@dataclass
class ImportResult:
    folder: Path
    notes: list[str] = field(default_factory=list)
    """Things worth knowing that are not errors (a CPU workload added, none possible)."""


# -- reading an imported problem -------------------------------------------------------------

def read_problem_sidecar(folder: Path | str) -> ProblemSidecar | None:
    """The sidecar of a problem imported from FlashInfer-Trace; None for any other problem."""
    path = Path(folder) / SIDECAR
    if not path.is_file():
        return None
    try:
        return ProblemSidecar.model_validate_json(path.read_text(encoding="utf-8"))
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise FormatError(path, field_path(first["loc"]) or None, str(first["msg"]).removeprefix("Value error, "),
                          "import the definition again with `gpuarena import flashinfer`") from None


def reference_block(reference_source: str, where: Path | str) -> str:
    """The verbatim FlashInfer reference at the top of an imported problem's reference.py."""
    lines = reference_source.split("\n")
    if not lines or lines[0] != REFERENCE_HEADER or REFERENCE_END not in lines:
        raise FormatError(where, None, "is not the reference.py of an imported FlashInfer-Trace definition",
                          "import the definition again with `gpuarena import flashinfer`")
    return "\n".join(lines[1:lines.index(REFERENCE_END)])


# -- checks ----------------------------------------------------------------------------------

def _identifier(name: str, what: str, where: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name == "run" or name.startswith("_gpuarena"):
        raise UnsupportedFeature(where, f"{what} names that are not Python parameter names",
                                 f"{what} {name!r}: gpuarena passes inputs and outputs as parameters of solve()")


def _run_arity(definition: Definition, where: str) -> None:
    module = ast.parse(definition.reference)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in _GLUE_NAMES:
            raise UnsupportedFeature(where, "a reference that defines its own reference() or make_inputs()",
                                     f"the reference defines {node.name}, which the gpuarena glue needs")
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _GLUE_NAMES for t in node.targets):
            raise UnsupportedFeature(where, "a reference that defines its own reference() or make_inputs()",
                                     "the reference assigns one of those names")
    run = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    positional = len(run.args.posonlyargs) + len(run.args.args)
    required = positional - len(run.args.defaults)
    count = len(definition.inputs)
    if count < required or (count > positional and run.args.vararg is None):
        raise FormatError(where, "reference", f"run() takes {required} to {positional} positional arguments, "
                          f"but the definition has {count} inputs ({', '.join(definition.inputs)})",
                          "make run() take the inputs in the order of `inputs`")


_OPS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
}
_CALLS = {"min": min, "max": max, "abs": abs}


def evaluate_constraint(text: str, sizes: dict[str, int]) -> bool:
    """A constraint over axis sizes: arithmetic, comparisons, and/or/not, min/max/abs."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sizes:
                raise ValueError(f"unknown axis {node.id!r}")
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError(f"exponent {right} is too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else (not value if isinstance(node.op, ast.Not) else value)
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and all(type(op) in _OPS for op in node.ops):
            left = walk(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = walk(right_node)
                if not _OPS[type(op)](left, right):
                    return False
                left = right
            return True
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CALLS
                and not node.keywords):
            return _CALLS[node.func.id](*(walk(a) for a in node.args))
        raise ValueError(f"uses {type(node).__name__}")

    return bool(walk(ast.parse(text, mode="eval")))


def _elements(definition: Definition, sizes: dict[str, int]) -> int:
    return sum(math.prod(sizes[a] for a in spec.shape)
               for spec in (*definition.inputs.values(), *definition.outputs.values()) if spec.shape is not None)


@dataclass
class _Plan:
    dtype: str
    scalars: dict[str, int | float | bool]
    workloads: list[tuple[str, dict[str, int], list[str]]]
    """(name, all axis sizes, devices) per gpuarena workload."""
    cpu_smoke: str | None = None
    notes: list[str] = field(default_factory=list)


def _check_definition(definition: Definition, where: str) -> str:
    """The gpuarena workload dtype for this definition, or why it cannot be imported."""
    for kind, tensors in (("input", definition.inputs), ("output", definition.outputs)):
        for name, spec in tensors.items():
            _identifier(name, kind, where)
            if spec.shape is not None and spec.dtype not in DTYPES:
                raise UnsupportedFeature(where, f"the dtype {spec.dtype}",
                                         f"{kind} {name!r} is {spec.dtype}; gpuarena's dtypes are {', '.join(DTYPES)}")
    for name, spec in definition.outputs.items():
        if spec.shape is None:
            raise UnsupportedFeature(where, "scalar (non-tensor) outputs",
                                     f"output {name!r} has shape null; gpuarena compares tensor outputs only")
    dtypes = sorted({spec.dtype for spec in definition.outputs.values()})
    if len(dtypes) != 1:
        raise UnsupportedFeature(where, "outputs of different dtypes",
                                 f"outputs are {', '.join(f'{n}: {s.dtype}' for n, s in definition.outputs.items())}; "
                                 "a gpuarena workload has one dtype, which chooses one tolerance for every output")
    _run_arity(definition, where)
    return dtypes[0]


def _plan(definition: Definition, workloads: list[Trace], def_where: str, wl_where: str) -> _Plan:
    dtype = _check_definition(definition, def_where)
    var = definition.var_axes
    const = definition.const_axes
    scalars: dict[str, int | float | bool] = {}
    rows: list[tuple[str, dict[str, int], list[str]]] = []
    seen: set[str] = set()
    for index, entry in enumerate(workloads, start=1):
        w = entry.workload
        where = f"{wl_where}, workload {index} (uuid {w.uuid})"
        if entry.definition != definition.name:
            raise FormatError(where, "definition", f"names {entry.definition!r}, not {definition.name!r}",
                              "give the workloads of this definition")
        if not _NAME.match(w.uuid):
            raise UnsupportedFeature(where, "workload uuids with characters other than letters, digits, '_', '.', '-'",
                                     f"uuid {w.uuid!r} becomes the gpuarena workload's name")
        if w.uuid in seen:
            raise FormatError(where, "workload.uuid", f"{w.uuid!r} is used by an earlier workload", "make uuids unique")
        seen.add(w.uuid)
        missing = [a for a in var if a not in w.axes]
        extra = [a for a in w.axes if a not in var]
        if missing:
            raise FormatError(where, "workload.axes", f"gives no size for variable axis {', '.join(missing)}",
                              "give every variable axis a size")
        if extra:
            what = "constant" if all(a in const for a in extra) else "unknown"
            raise FormatError(where, "workload.axes", f"gives a size for {what} axis {', '.join(extra)}",
                              "give sizes for the definition's variable axes only")
        if set(w.inputs) != set(definition.inputs):
            raise FormatError(where, "workload.inputs",
                              f"names {', '.join(w.inputs) or 'no inputs'}; the definition's are {', '.join(definition.inputs)}",
                              "describe every input, and no other")
        for name, spec in definition.inputs.items():
            source = w.inputs[name]
            if isinstance(source, SafetensorsInput):
                raise UnsupportedFeature(where, "inputs loaded from safetensors files",
                                         f"input {name!r} comes from {source.path} (key {source.tensor_key!r}); "
                                         "a gpuarena problem draws its inputs in make_inputs()")
            if spec.shape is None:
                if not isinstance(source, ScalarInput):
                    raise UnsupportedFeature(where, "random values for scalar inputs",
                                             f"scalar input {name!r} is {source.type}")
                if name in scalars and (scalars[name] != source.value or type(scalars[name]) is not type(source.value)):
                    raise UnsupportedFeature(where, "scalar inputs whose value differs between workloads",
                                             f"input {name!r} is {source.value!r} here and {scalars[name]!r} in an "
                                             "earlier workload; make_inputs() knows a workload by its axes and dtype only")
                scalars[name] = source.value
            elif isinstance(source, ScalarInput):
                raise FormatError(where, f"workload.inputs.{name}", "is a scalar, but the definition declares a tensor",
                                  "use {\"type\": \"random\"}")
        sizes = {**const, **{a: w.axes[a] for a in var}}
        for text in definition.constraints:
            try:
                ok = evaluate_constraint(text, sizes)
            except (ValueError, ArithmeticError, TypeError) as exc:
                raise UnsupportedFeature(def_where, "constraints beyond arithmetic, comparisons and min/max/abs",
                                         f"constraint {text!r}: {exc}") from None
            if not ok:
                raise FormatError(where, "workload.axes", f"violate the constraint {text!r}",
                                  "give axis sizes that satisfy the definition's constraints")
        devices = ["cpu", "cuda"] if _elements(definition, sizes) <= CPU_MAX_ELEMENTS else ["cuda"]
        ordered = {a: sizes[a] for a in definition.axes}
        rows.append((w.uuid, ordered, devices))
    plan = _Plan(dtype=dtype, scalars=scalars, workloads=rows)
    if not any("cpu" in devices for _, _, devices in rows):
        _add_cpu_smoke(definition, plan)
    return plan


def _add_cpu_smoke(definition: Definition, plan: _Plan) -> None:
    """A small CPU-only workload (gpuarena checks problems on the CPU): the smallest workload's
    variable axes halved until it fits, if the constraints allow."""
    sizes = dict(min(plan.workloads, key=lambda row: _elements(definition, row[1]))[1])
    var = definition.var_axes
    while _elements(definition, sizes) > CPU_MAX_ELEMENTS:
        largest = max(var, key=lambda a: sizes[a], default=None)
        if largest is None or sizes[largest] <= 1:
            plan.notes.append(f"no workload fits the CPU (at most {CPU_MAX_ELEMENTS} elements) and the constant axes "
                              "alone exceed that: `gpuarena check` needs a CPU workload; add one to problem.toml")
            return
        sizes[largest] = (sizes[largest] + 1) // 2
    try:
        ok = all(evaluate_constraint(text, sizes) for text in definition.constraints)
    except (ValueError, ArithmeticError, TypeError):
        ok = False
    name = CPU_SMOKE if CPU_SMOKE not in {row[0] for row in plan.workloads} else f"{CPU_SMOKE}-gpuarena"
    if not ok:
        plan.notes.append("no workload fits the CPU and a smaller one would break the constraints: `gpuarena check` "
                          "needs a CPU workload; add one to problem.toml")
        return
    plan.workloads.append((name, sizes, ["cpu"]))
    plan.cpu_smoke = name
    plan.notes.append(f"no workload fits the CPU: added {name} ({', '.join(f'{a}={v}' for a, v in sizes.items())}), "
                      "CPU only, gpuarena's alone (flashinfer.json marks it; it is never exported)")


# -- writing the problem -----------------------------------------------------------------------

def _toml_str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_\-]+", key) else _toml_str(key)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(_toml_str(i) for i in items) + "]"


def problem_name(definition_name: str) -> str:
    """A gpuarena problem name (lower case, digits, '_', '-') for a definition name."""
    name = re.sub(r"[^a-z0-9_\-]+", "-", definition_name.lower()).strip("-")
    return name or "flashinfer-definition"


def _problem_toml(definition: Definition, plan: _Plan, convention: str, level: int) -> str:
    summary = (definition.description or "").strip().split("\n")[0] or \
        f"FlashInfer-Trace definition {definition.name} ({definition.op_type})."
    models = [t.split(":", 1)[1].strip() for t in definition.tags if t.startswith("model:")]
    tags = list(dict.fromkeys(["flashinfer", definition.op_type, *definition.tags]))
    lines = [
        f"# Imported from the FlashInfer-Trace definition {_toml_str(definition.name)} by `gpuarena import flashinfer`.",
        f"# {SIDECAR} keeps the definition; reference.py runs its reference verbatim.",
        f"name = {_toml_str(problem_name(definition.name))}",
        f"level = {level}",
        f"summary = {_toml_str(summary)}",
        f"tags = {_toml_list(tags)}",
        "weight = 1.0",
        f"convention = {_toml_str(convention)}",
        f"outputs = {_toml_list(list(definition.outputs))}",
        "",
        "[provenance]",
        'framework = "pytorch"',
        f"operator = {_toml_str('flashinfer-trace:' + definition.name)}",
        f"models = {_toml_list(models)}",
    ]
    for name, sizes, devices in plan.workloads:
        axes = ", ".join(f"{_toml_key(a)} = {v}" for a, v in sizes.items())
        lines += ["", "[[workloads]]", f"name = {_toml_str(name)}", f"axes = {{ {axes} }}",
                  f"dtype = {_toml_str(plan.dtype)}", "weight = 1.0", f"devices = {_toml_list(devices)}"]
    return "\n".join(lines) + "\n"


_GLUE = '''
# Below: gpuarena's glue, written by `gpuarena import flashinfer`. It reads the definition from
# flashinfer.json beside this file: reference() calls run() above; make_inputs() draws every
# tensor input at its declared shape and dtype (floats: standard normal times a random scale in
# [0.5, 1.5); integers: uniform in [-128, 128) for int8, [-1024, 1024) otherwise; bools: fair
# coins) and passes every scalar input the value all the workloads give it.

import json as _gpuarena_json
from pathlib import Path as _GpuarenaPath

import torch as _gpuarena_torch

_GPUARENA = _gpuarena_json.loads((_GpuarenaPath(__file__).parent / "flashinfer.json").read_text(encoding="utf-8"))
_GPUARENA_DEFINITION = _GPUARENA["definition"]


def _gpuarena_outputs(result):
    """run()'s result in the order of the definition's outputs (a dict is accepted, as FlashInfer does)."""
    if isinstance(result, dict):
        values = tuple(result[name] for name in _GPUARENA_DEFINITION["outputs"])
        return values[0] if len(values) == 1 else values
    return result


def reference({params}):
    """The definition's run(); returns its outputs in the order of `outputs` in problem.toml."""
    return _gpuarena_outputs(run({params}))


def _gpuarena_random(shape, dtype, device, generator):
    if dtype.is_floating_point:
        x = _gpuarena_torch.randn(shape, generator=generator, device=device, dtype=_gpuarena_torch.float32)
        scale = 0.5 + _gpuarena_torch.rand((), generator=generator, device=device)
        return (x * scale).to(dtype)
    if dtype == _gpuarena_torch.bool:
        return _gpuarena_torch.randint(0, 2, shape, generator=generator, device=device).to(dtype)
    low, high = (-128, 128) if dtype == _gpuarena_torch.int8 else (-1024, 1024)
    return _gpuarena_torch.randint(low, high, shape, generator=generator, device=device, dtype=dtype)


def make_inputs(axes, dtype, device, generator):
    """Inputs for one workload; dtype must be the definition's (its dtypes are fixed)."""
    outputs = {{spec["dtype"] for spec in _GPUARENA_DEFINITION["outputs"].values()}}
    if dtype != getattr(_gpuarena_torch, outputs.pop()):
        raise ValueError(f"this problem's dtypes are fixed by its FlashInfer-Trace definition; {{dtype}} is not its dtype")
    sizes = dict(axes)
    for name, axis in _GPUARENA_DEFINITION["axes"].items():
        if axis["type"] == "const" and sizes.setdefault(name, axis["value"]) != axis["value"]:
            raise ValueError(f"axis {{name}} is constant ({{axis['value']}}) in the definition, not {{sizes[name]}}")
    inputs = {{}}
    for name, spec in _GPUARENA_DEFINITION["inputs"].items():
        if spec["shape"] is None:
            inputs[name] = _GPUARENA["scalars"][name]
        else:
            shape = tuple(sizes[axis] for axis in spec["shape"])
            inputs[name] = _gpuarena_random(shape, getattr(_gpuarena_torch, spec["dtype"]), device, generator)
    return inputs
'''


def _reference_py(definition: Definition) -> str:
    block = definition.reference if definition.reference.endswith("\n") else definition.reference + "\n"
    return f"{REFERENCE_HEADER}\n{block}{REFERENCE_END}\n" + _GLUE.format(params=", ".join(definition.inputs))


def _readme(definition: Definition, plan: _Plan) -> str:
    def shape(spec: Any) -> str:
        return "scalar" if spec.shape is None else "[" + ", ".join(spec.shape) + "]"

    rows = [f"# {definition.name}", "", definition.description or f"A `{definition.op_type}` operator.", "",
            f"Imported from the FlashInfer-Trace definition `{definition.name}` (op_type `{definition.op_type}`).", "",
            "| axis | kind | size |", "| --- | --- | --- |"]
    for name, axis in definition.axes.items():
        rows.append(f"| {name} | {axis.type} | {getattr(axis, 'value', 'per workload')} |")
    rows += ["", "| tensor | role | shape | dtype |", "| --- | --- | --- | --- |"]
    for role, tensors in (("input", definition.inputs), ("output", definition.outputs)):
        for name, spec in tensors.items():
            value = f" = {plan.scalars[name]!r}" if spec.shape is None and name in plan.scalars else ""
            rows.append(f"| {name} | {role} | {shape(spec)}{value} | {spec.dtype} |")
    if definition.constraints:
        rows += ["", "Constraints: " + "; ".join(f"`{c}`" for c in definition.constraints)]
    return "\n".join(rows) + "\n"


def problem_files(definition: Definition, workloads: list[Trace], *, convention: str = "destination",
                  level: int | None = None, definition_path: str = "definition",
                  workloads_path: str = "workloads") -> tuple[dict[str, str], list[str]]:
    """The files of the gpuarena problem for a definition and its workloads, and notes."""
    if convention not in ("destination", "return"):
        raise GpuarenaError(f"convention must be destination or return, not {convention!r}")
    if not workloads:
        raise FormatError(workloads_path, None, "holds no workloads", "give at least one workload")
    plan = _plan(definition, workloads, definition_path, workloads_path)
    level = level or (2 if "fused" in definition.tags else 1)
    sidecar = ProblemSidecar(definition=definition, scalars=plan.scalars, cpu_smoke=plan.cpu_smoke)
    files = {
        PROBLEM_FILE: _problem_toml(definition, plan, convention, level),
        REFERENCE_FILE: _reference_py(definition),
        SIDECAR: sidecar.model_dump_json(indent=2) + "\n",
        "README.md": _readme(definition, plan),
    }
    return files, plan.notes


def _verify(problem: Problem, definition: Definition) -> None:
    """Run the reference on the smallest CPU workload: its outputs must have the definition's
    shapes and dtypes (the definition and its reference must agree)."""
    import torch

    from gpuarena.harness.session import as_outputs

    cpu = problem.spec.workloads_for("cpu")
    if not cpu:
        return
    workload = min(cpu, key=lambda w: _elements(definition, w.axes))
    generator = torch.Generator(device="cpu").manual_seed(0)
    where = problem.path / REFERENCE_FILE
    try:
        inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)
        with torch.no_grad():
            outs = as_outputs(problem.reference(**inputs))
    except GpuarenaError:
        raise
    except Exception as exc:  # noqa: BLE001  the reference's own failure, shown as it is
        raise FormatError(where, "reference", f"running it on workload {workload.name} failed: "
                          f"{type(exc).__name__}: {exc}", "fix the definition's reference") from None
    if len(outs) != len(definition.outputs):
        raise FormatError(where, "reference", f"run() returned {len(outs)} outputs; the definition has "
                          f"{len(definition.outputs)} ({', '.join(definition.outputs)})", "fix the definition")
    for (name, spec), out in zip(definition.outputs.items(), outs):
        shape = [workload.axes[a] for a in spec.shape or []]
        if not isinstance(out, torch.Tensor) or list(out.shape) != shape or out.dtype != DTYPES[spec.dtype]:
            got = f"{list(out.shape)} {str(out.dtype).removeprefix('torch.')}" if isinstance(out, torch.Tensor) else type(out).__name__
            raise FormatError(where, "reference", f"output {name} of run() on workload {workload.name} is {got}; "
                              f"the definition says {shape} {spec.dtype}", "fix the definition or its reference")


def _write_folder(files: dict[str, str], out_dir: Path, force: bool) -> Path:
    """Write into a fresh folder beside out_dir, then put it in place."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise GpuarenaError(f"{out_dir} exists and is not empty (--force replaces it)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    for name, text in files.items():
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return staging


def _put_in_place(staging: Path, out_dir: Path) -> Path:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)
    return out_dir


def import_definition(definition_path: Path | str, workloads_path: Path | str, out_dir: Path | str, *,
                      convention: str = "destination", level: int | None = None, force: bool = False,
                      verify: bool = True) -> ImportResult:
    """Read a Definition JSON and its workloads JSONL; write the gpuarena problem folder out_dir.
    With verify, the reference runs once on the smallest CPU workload to confirm it returns the
    definition's output shapes and dtypes."""
    definition = read_definition(definition_path)
    workloads = read_workloads(workloads_path, definition=definition.name)
    files, notes = problem_files(definition, workloads, convention=convention, level=level,
                                 definition_path=str(definition_path), workloads_path=str(workloads_path))
    out_dir = Path(out_dir)
    staging = _write_folder(files, out_dir, force)
    try:
        load_spec(staging)
        if verify:
            problem = load_problem(staging)
            try:
                _verify(problem, definition)
            finally:
                if problem._module is not None:  # imported from the staging folder: forget it
                    sys.modules.pop(problem._module.__name__, None)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ImportResult(_put_in_place(staging, out_dir), notes)


# -- solutions -------------------------------------------------------------------------------

def _adapter(solution: Solution, problem: Problem, sidecar: ProblemSidecar | None, where: str) -> str:
    """solve() in the problem's convention, calling the solution's entry point in its own."""
    destination = problem.spec.convention == "destination"
    inputs = problem.input_names
    outputs = problem.spec.outputs
    params = inputs + (outputs if destination else [])
    for name in params:
        _identifier(name, "parameter", where)
    head = [
        ADAPTER_HEADER,
        f"# flashinfer-entry-point: {solution.spec.entry_point}",
        f"# flashinfer-destination-passing-style: {str(solution.spec.destination_passing_style).lower()}",
        "import importlib.util as _util",
        "import sys as _sys",
        "from pathlib import Path as _Path",
        "",
        "import torch",
        "",
        f"_spec = _util.spec_from_file_location('flashinfer_entry_' + __name__, _Path(__file__).parent / {solution.spec.entry_file!r})",
        "_module = _util.module_from_spec(_spec)",
        "_sys.modules[_spec.name] = _module  # as an import would (dataclasses, pickling and Triton look there)",
        "_spec.loader.exec_module(_module)",
        f"_run = _module.{solution.spec.entry_function}",
        f"_OUTPUTS = {outputs!r}",
        "",
    ]
    if destination:  # the solution returns its outputs; the problem passes destinations
        body = [
            f"def solve({', '.join(params)}):",
            f"    result = _run({', '.join(inputs)})",
            "    if isinstance(result, dict):",
            "        result = tuple(result[name] for name in _OUTPUTS)",
            "    values = tuple(result) if isinstance(result, (tuple, list)) else (result,)",
            f"    destinations = ({', '.join(outputs)},)",
            "    if len(values) != len(destinations):",
            "        raise ValueError(f'run() returned {len(values)} outputs, expected {len(destinations)}')",
            "    for name, value, destination in zip(_OUTPUTS, values, destinations):",
            "        if value.shape != destination.shape or value.dtype != destination.dtype:",
            "            raise ValueError(f'output {name}: run() returned {list(value.shape)} {value.dtype}, '",
            "                             f'expected {list(destination.shape)} {destination.dtype}')",
            "        destination.copy_(value)",
            "",
        ]
        return "\n".join(head + body)
    # the solution writes into given outputs; the problem expects them returned
    if sidecar is None:
        raise UnsupportedFeature(where, "destination-passing solutions for problems not imported from FlashInfer-Trace",
                                 "the output shapes come from the definition; import the problem with "
                                 "`gpuarena import flashinfer` or use a value-returning solution")
    definition = sidecar.definition
    bindings: dict[str, tuple[int, int]] = {}
    for position, (name, spec) in enumerate(definition.inputs.items()):
        for dim, axis in enumerate(spec.shape or []):
            if axis in definition.var_axes:
                bindings.setdefault(axis, (position, dim))
    specs = []
    for name, spec in definition.outputs.items():
        unbound = [a for a in spec.shape or [] if a in definition.var_axes and a not in bindings]
        if unbound:
            raise UnsupportedFeature(where, "outputs with axes no input has",
                                     f"output {name!r} has axis {unbound[0]!r}, so its size is unknown until run() returns")
        specs.append((list(spec.shape or []), spec.dtype))
    body = [
        f"_CONST = {definition.const_axes!r}",
        f"_BINDINGS = {bindings!r}",
        f"_SPECS = {specs!r}",
        "",
        "",
        f"def solve({', '.join(params)}):",
        f"    args = ({', '.join(inputs)},)",
        "    sizes = dict(_CONST)",
        "    for axis, (position, dim) in _BINDINGS.items():",
        "        sizes[axis] = args[position].shape[dim]",
        "    device = next(a.device for a in args if isinstance(a, torch.Tensor))",
        "    outs = tuple(torch.empty([sizes[a] for a in shape], dtype=getattr(torch, dtype), device=device)",
        "                 for shape, dtype in _SPECS)",
        "    _run(*args, *outs)",
        "    return outs[0] if len(outs) == 1 else outs",
        "",
    ]
    return "\n".join(head + body)


def solution_files(solution: Solution, problem: Problem, where: str = "solution") -> dict[str, str]:
    """The files of the gpuarena solution folder for a FlashInfer Solution, for this problem."""
    sidecar = read_problem_sidecar(problem.path)
    if sidecar is not None and solution.definition != sidecar.definition.name:
        raise FormatError(where, "definition", f"names {solution.definition!r}, but {problem.id} was imported from "
                          f"{sidecar.definition.name!r}", "import it for the problem of its definition")
    spec = solution.spec
    if spec.language not in LANGUAGES:
        raise UnsupportedFeature(where, f"{spec.language} solutions",
                                 f"gpuarena builds {', '.join(sorted(set(LANGUAGES.values())))} solutions only")
    if spec.language == "cuda" and spec.binding != "torch":
        raise UnsupportedFeature(where, "CUDA solutions bound with tvm-ffi",
                                 "gpuarena builds CUDA with torch.utils.cpp_extension (binding \"torch\")")
    if spec.language != "cuda" and not spec.entry_file.endswith(".py"):
        raise FormatError(where, "spec.entry_point", f"names {spec.entry_file!r}, not a .py file",
                          "a python or triton entry point is a function in a .py file")
    for source in solution.sources:
        if why := unsafe_source_name(source.path):
            raise FormatError(where, "sources", f"path {source.path!r} {why}", "rename the file")
        if source.path in (MANIFEST_FILE, SIDECAR, ADAPTER_FILE):
            raise FormatError(where, "sources", f"path {source.path!r} is a name gpuarena's solution folder uses",
                              "rename the file")
    destination = problem.spec.convention == "destination"
    files = {s.path: s.content for s in solution.sources}
    if spec.destination_passing_style == destination:
        entry = spec.entry_function if spec.language == "cuda" else f"{spec.entry_file}:{spec.entry_function}"
    elif spec.language == "cuda":
        raise UnsupportedFeature(where, "CUDA solutions in the other calling convention than the problem's",
                                 f"the solution is {'destination-passing' if spec.destination_passing_style else 'value-returning'}, "
                                 f"the problem's convention is {problem.spec.convention}")
    else:
        files[ADAPTER_FILE] = _adapter(solution, problem, sidecar, where)
        entry = f"{ADAPTER_FILE}:solve"
    manifest = [
        f"# Imported from the FlashInfer-Trace solution {_toml_str(solution.name)} by `gpuarena import flashinfer-solution`.",
        f"language = {_toml_str(LANGUAGES[spec.language])}",
        f"entry_point = {_toml_str(entry)}",
        f"sources = {_toml_list(list(files))}",
    ]
    meta = SolutionSidecar(solution=solution.model_dump(mode="json", exclude={"sources"}))
    return {**files, MANIFEST_FILE: "\n".join(manifest) + "\n", SIDECAR: meta.model_dump_json(indent=2) + "\n"}


def import_solution(solution_path: Path | str, problem: Problem, out_dir: Path | str, *,
                    force: bool = False) -> Path:
    """Read a FlashInfer Solution JSON; write a gpuarena solution folder that `gpuarena run`
    accepts for this problem."""
    solution = read_solution(solution_path)
    files = solution_files(solution, problem, str(solution_path))
    out_dir = Path(out_dir)
    staging = _write_folder(files, out_dir, force)
    try:
        load_solution(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _put_in_place(staging, out_dir)


def read_solution_sidecar(folder: Path | str) -> dict[str, Any] | None:
    """The FlashInfer metadata kept beside an imported solution; None for any other solution."""
    path = Path(folder) / SIDECAR
    if not Path(folder).is_dir() or not path.is_file():
        return None
    try:
        return SolutionSidecar.model_validate_json(path.read_text(encoding="utf-8")).solution
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        raise FormatError(path, field_path(first["loc"]) or None, str(first["msg"]),
                          "import the solution again with `gpuarena import flashinfer-solution`") from None

