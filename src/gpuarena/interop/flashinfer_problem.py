"""A FlashInfer-Trace Definition and its workloads as the files of a gpuarena problem folder:
the checks that refuse what gpuarena's problem format cannot carry, the plan of workloads (a
CPU workload added where none fits, each workload's own inputs where they differ beyond axes),
and the text of problem.toml and README.md (reference.py: flashinfer_glue; the recorded
safetensors inputs: flashinfer_data)."""

from __future__ import annotations

import ast
import json
import keyword
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuarena.contracts.packed import MAX_PROBLEM_BYTES
from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.interop.flashinfer_constraints import evaluate_constraint
from gpuarena.interop.flashinfer_data import DATA_FILE, RecordedInputs, RecordedTensor, read_tensor
from gpuarena.interop.flashinfer_glue import reference_py
from gpuarena.interop.flashinfer_sidecar import SIDECAR, ProblemSidecar, UnsupportedFeature
from gpuarena.interop.flashinfer_trace import Definition, InputSource, SafetensorsInput, ScalarInput, Trace
from gpuarena.problems.loader import PROBLEM_FILE, REFERENCE_FILE
from gpuarena.problems.model import DTYPES

CPU_MAX_ELEMENTS = 1 << 24
"""A workload whose inputs and outputs hold at most this many elements in all runs on the CPU too."""
CPU_SMOKE = "cpu-smoke"
"""The name of the small CPU-only workload added when no FlashInfer workload is small enough."""
_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_GLUE_NAMES = ("reference", "make_inputs", "fixed_inputs")
WORKLOAD_AXIS = "flashinfer_workload"
"""The gpuarena-only axis numbering the FlashInfer workloads where their inputs differ beyond
axes and dtype (recorded tensors, optional inputs some leave out); never exported."""


# -- checks ----------------------------------------------------------------------------------


def _identifier(name: str, what: str, where: str) -> None:
    if not name.isidentifier() or keyword.iskeyword(name) or name == "run" or name.startswith("_gpuarena"):
        raise UnsupportedFeature(
            where,
            f"{what} names that are not Python parameter names",
            f"{what} {name!r}: gpuarena passes inputs and outputs as parameters of solve()",
        )


def _run_arity(definition: Definition, where: str) -> None:
    module = ast.parse(definition.reference)
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in _GLUE_NAMES:
            raise UnsupportedFeature(
                where,
                "a reference that defines its own reference(), make_inputs() or fixed_inputs()",
                f"the reference defines {node.name}, which the gpuarena glue needs",
            )
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in _GLUE_NAMES for t in node.targets):
            raise UnsupportedFeature(
                where,
                "a reference that defines its own reference(), make_inputs() or fixed_inputs()",
                "the reference assigns one of those names",
            )
    run = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "run")
    positional = len(run.args.posonlyargs) + len(run.args.args)
    required = positional - len(run.args.defaults)
    count = len(definition.inputs)
    if count < required or (count > positional and run.args.vararg is None):
        raise FormatError(
            where,
            "reference",
            f"run() takes {required} to {positional} positional arguments, "
            f"but the definition has {count} inputs ({', '.join(definition.inputs)})",
            "make run() take the inputs in the order of `inputs`",
        )


def _elements(definition: Definition, sizes: dict[str, int]) -> int:
    return sum(
        math.prod(sizes[a] for a in spec.shape)
        for spec in (*definition.inputs.values(), *definition.outputs.values())
        if spec.shape is not None
    )


@dataclass
class _Plan:
    dtype: str
    scalars: dict[str, int | float | bool]
    """Scalar input -> its value; one that varies (`varying`): the value for a workload without
    its own inputs (the CPU smoke)."""
    omitted: list[str]
    """Optional inputs every workload leaves out (make_inputs() passes None)."""
    workloads: list[tuple[str, dict[str, int], list[str]]]
    """(name, all axis sizes, devices) per gpuarena workload."""
    given: list[dict[str, InputSource]] = field(default_factory=list)
    """Each FlashInfer workload's inputs as it gives them, where the workloads differ beyond axes
    (a safetensors input, an optional input some leave out, a scalar in `varying`); empty where
    they do not."""
    recorded: dict[str, dict[str, RecordedTensor]] = field(default_factory=dict)
    """The safetensors inputs' tensors, by path and key (flashinfer_data.DATA_FILE)."""
    varying: list[str] = field(default_factory=list)
    """Scalar inputs whose value differs between workloads (each gets its own, from `given`)."""
    cpu_smoke: str | None = None
    notes: list[str] = field(default_factory=list)


FP8 = ("float8_e4m3fn", "float8_e5m2")
"""fp8: inputs drawn in float32 and cast (torch has them on the CPU); outputs compared as
FlashInfer-Bench compares every output, upcast, within atol = rtol = FP8_TOLERANCE."""
FP8_TOLERANCE = 1e-2
"""FlashInfer-Bench's default atol and rtol (bench/config.py), which judge fp8 outputs here."""


def _check_definition(definition: Definition, where: str) -> str:
    """The gpuarena workload dtype for this definition, or why it cannot be imported."""
    for kind, tensors in (("input", definition.inputs), ("output", definition.outputs)):
        for name, spec in tensors.items():
            _identifier(name, kind, where)
            if spec.shape is None or spec.dtype in DTYPES or spec.dtype in FP8:
                continue
            raise UnsupportedFeature(
                where,
                f"the dtype {spec.dtype}",
                f"{kind} {name!r} is {spec.dtype}; gpuarena's dtypes are {', '.join(DTYPES)}, and {' and '.join(FP8)}",
            )
    for name, spec in definition.outputs.items():
        if spec.shape is None:
            raise UnsupportedFeature(
                where,
                "scalar (non-tensor) outputs",
                f"output {name!r} has shape null; gpuarena compares tensor outputs only",
            )
    _run_arity(definition, where)
    return workload_dtype([spec.dtype for spec in definition.outputs.values()])


FLOATS = ("bfloat16", "float16", "float32", "float64")  # least precise first


def workload_dtype(outputs: list[str]) -> str:
    """One dtype for outputs of several (attention's output and its float32 lse): the least
    precise float, whose tolerance judges every float output, as FlashInfer-Bench judges them all
    with one (integers are compared exactly); all integers: the first output's. fp8 outputs are
    not gpuarena dtypes: the least precise other float, else float32, as FlashInfer-Bench
    compares them upcast to float32 (the tolerance is then its own: _problem_toml)."""
    if any(dtype in FP8 for dtype in outputs):
        return next((dtype for dtype in FLOATS if dtype in outputs), "float32")
    return next((dtype for dtype in FLOATS if dtype in outputs), outputs[0])


def _recorded(
    definition: Definition, name: str, source: SafetensorsInput, sizes: dict[str, int], roots: list[Path], where: str
) -> RecordedTensor:
    """A safetensors input's tensor, read now (the problem keeps it: flashinfer_data)."""
    spec = definition.inputs[name]
    if spec.shape is None:
        raise FormatError(
            where, f"workload.inputs.{name}", "is a safetensors tensor, but the definition declares a scalar"
        )
    shape = [sizes[a] for a in spec.shape]
    return read_tensor(source, spec, shape, roots, where, f"workload.inputs.{name}")


def _plan(definition: Definition, workloads: list[Trace], def_where: str, wl_where: str, roots: list[Path]) -> _Plan:
    dtype = _check_definition(definition, def_where)
    var = definition.var_axes
    const = definition.const_axes
    scalars: dict[str, int | float | bool] = {}
    varying: list[str] = []
    presence: list[list[str]] = []
    recorded: dict[str, dict[str, RecordedTensor]] = {}
    rows: list[tuple[str, dict[str, int], list[str]]] = []
    seen: set[str] = set()
    for index, entry in enumerate(workloads, start=1):
        w = entry.workload
        where = f"{wl_where}, workload {index} (uuid {w.uuid})"
        if entry.definition != definition.name:
            raise FormatError(
                where,
                "definition",
                f"names {entry.definition!r}, not {definition.name!r}",
                "give the workloads of this definition",
            )
        if not _NAME.match(w.uuid):
            raise UnsupportedFeature(
                where,
                "workload uuids with characters other than letters, digits, '_', '.', '-'",
                f"uuid {w.uuid!r} becomes the gpuarena workload's name",
            )
        if w.uuid in seen:
            raise FormatError(where, "workload.uuid", f"{w.uuid!r} is used by an earlier workload", "make uuids unique")
        seen.add(w.uuid)
        missing = [a for a in var if a not in w.axes]
        extra = [a for a in w.axes if a not in var]
        if missing:
            raise FormatError(
                where,
                "workload.axes",
                f"gives no size for variable axis {', '.join(missing)}",
                "give every variable axis a size",
            )
        if extra:
            what = "constant" if all(a in const for a in extra) else "unknown"
            raise FormatError(
                where,
                "workload.axes",
                f"gives a size for {what} axis {', '.join(extra)}",
                "give sizes for the definition's variable axes only",
            )
        left_out = [n for n, spec in definition.inputs.items() if spec.optional and n not in w.inputs]
        if set(w.inputs) | set(left_out) != set(definition.inputs):
            raise FormatError(
                where,
                "workload.inputs",
                f"names {', '.join(w.inputs) or 'no inputs'}; the definition's are {', '.join(definition.inputs)}",
                "describe every input that is not optional, and no other",
            )
        presence.append(left_out)
        sizes = {**const, **{a: w.axes[a] for a in var}}
        for name, spec in definition.inputs.items():
            if name in left_out:
                continue  # run() gets None
            source = w.inputs[name]
            if isinstance(source, SafetensorsInput):
                tensor = _recorded(definition, name, source, sizes, roots, where)
                recorded.setdefault(source.path, {})[source.tensor_key] = tensor
                continue
            if spec.shape is None:
                if not isinstance(source, ScalarInput):
                    raise UnsupportedFeature(
                        where, "random values for scalar inputs", f"scalar input {name!r} is {source.type}"
                    )
                first = scalars.setdefault(name, source.value)
                if (first != source.value or type(first) is not type(source.value)) and name not in varying:
                    varying.append(name)  # each workload gets its own: `given`, by the workload axis
            elif isinstance(source, ScalarInput):
                raise FormatError(
                    where,
                    f"workload.inputs.{name}",
                    "is a scalar, but the definition declares a tensor",
                    'use {"type": "random"}',
                )
        for text in definition.constraints:
            try:
                ok = evaluate_constraint(text, sizes)
            except (ValueError, ArithmeticError, TypeError) as exc:
                raise UnsupportedFeature(
                    def_where,
                    "constraints beyond arithmetic, comparisons and min/max/abs",
                    f"constraint {text!r}: {exc}",
                ) from None
            if not ok:
                raise FormatError(
                    where,
                    "workload.axes",
                    f"violate the constraint {text!r}",
                    "give axis sizes that satisfy the definition's constraints",
                )
        devices = ["cpu", "cuda"] if _elements(definition, sizes) <= CPU_MAX_ELEMENTS else ["cuda"]
        ordered = {a: sizes[a] for a in definition.axes}
        rows.append((w.uuid, ordered, devices))
    omitted = [n for n in definition.inputs if all(n in left_out for left_out in presence)]
    differ = bool(recorded) or bool(varying) or any(left_out != omitted for left_out in presence)
    given = [dict(entry.workload.inputs) for entry in workloads] if differ else []
    plan = _Plan(dtype, scalars, omitted, rows, given=given, recorded=recorded, varying=varying)
    if not any("cpu" in devices for _, _, devices in rows):
        _add_cpu_smoke(definition, plan)
    return plan


def _add_cpu_smoke(definition: Definition, plan: _Plan) -> None:
    """A small CPU-only workload (gpuarena checks problems on the CPU): the smallest workload's
    variable axes halved until it fits, if the constraints allow."""
    smallest = min(range(len(plan.workloads)), key=lambda i: _elements(definition, plan.workloads[i][1]))
    sizes = dict(plan.workloads[smallest][1])
    for name in plan.varying:  # the scalars of the workload it is made from
        source = plan.given[smallest].get(name)
        if isinstance(source, ScalarInput):
            plan.scalars[name] = source.value
    var = definition.var_axes
    while _elements(definition, sizes) > CPU_MAX_ELEMENTS:
        largest = max(var, key=lambda a: sizes[a], default=None)
        if largest is None or sizes[largest] <= 1:
            plan.notes.append(
                f"no workload fits the CPU (at most {CPU_MAX_ELEMENTS} elements) and the constant axes "
                "alone exceed that: it is checked by its first run on a GPU (`unchecked` in problem.toml)"
            )
            return
        sizes[largest] = (sizes[largest] + 1) // 2
    try:
        ok = all(evaluate_constraint(text, sizes) for text in definition.constraints)
    except (ValueError, ArithmeticError, TypeError):
        ok = False
    name = CPU_SMOKE if CPU_SMOKE not in {row[0] for row in plan.workloads} else f"{CPU_SMOKE}-gpuarena"
    if not ok:
        plan.notes.append(
            "no workload fits the CPU and a smaller one would break the constraints: it is checked by "
            "its first run on a GPU (`unchecked` in problem.toml)"
        )
        return
    plan.workloads.append((name, sizes, ["cpu"]))
    plan.cpu_smoke = name
    plan.notes.append(
        f"no workload fits the CPU: added {name} ({', '.join(f'{a}={v}' for a, v in sizes.items())}), "
        "CPU only, gpuarena's alone (flashinfer.json marks it; it is never exported)"
    )


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


def workload_axis(definition: Definition) -> str:
    """WORKLOAD_AXIS, made unlike the definition's own axis names."""
    name = WORKLOAD_AXIS
    while name in definition.axes:
        name += "_"
    return name


def _problem_toml(definition: Definition, plan: _Plan, convention: str, level: int) -> str:
    summary = (definition.description or "").strip().split("\n")[
        0
    ] or f"FlashInfer-Trace definition {definition.name} ({definition.op_type})."
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
    if any(spec.dtype in FP8 for spec in definition.outputs.values()):
        lines += [
            "",
            f"# fp8 outputs: compared upcast, within FlashInfer-Bench's default atol and rtol (and an L2 bound of {2 * FP8_TOLERANCE:g})",
            f"[tolerance.{plan.dtype}]",
            f"atol = {FP8_TOLERANCE!r}",
            f"rtol = {FP8_TOLERANCE!r}",
            f"l2 = {2 * FP8_TOLERANCE!r}",
        ]
    index_axis = workload_axis(definition) if plan.given else None
    for index, (name, sizes, devices) in enumerate(plan.workloads):
        numbered = {index_axis: index} if index_axis and name != plan.cpu_smoke else {}
        axes = ", ".join(f"{_toml_key(a)} = {v}" for a, v in {**sizes, **numbered}.items())
        lines += [
            "",
            "[[workloads]]",
            f"name = {_toml_str(name)}",
            f"axes = {{ {axes} }}",
            f"dtype = {_toml_str(plan.dtype)}",
            "weight = 1.0",
            f"devices = {_toml_list(devices)}",
        ]
    return "\n".join(lines) + "\n"


def _readme(definition: Definition, plan: _Plan) -> str:
    def shape(spec: Any) -> str:
        return "scalar" if spec.shape is None else "[" + ", ".join(spec.shape) + "]"

    rows = [
        f"# {definition.name}",
        "",
        definition.description or f"A `{definition.op_type}` operator.",
        "",
        f"Imported from the FlashInfer-Trace definition `{definition.name}` (op_type `{definition.op_type}`).",
        "",
        "| axis | kind | size |",
        "| --- | --- | --- |",
    ]
    for name, axis in definition.axes.items():
        rows.append(f"| {name} | {axis.type} | {getattr(axis, 'value', 'per workload')} |")
    rows += ["", "| tensor | role | shape | dtype |", "| --- | --- | --- | --- |"]
    for role, tensors in (("input", definition.inputs), ("output", definition.outputs)):
        for name, spec in tensors.items():
            value = f" = {plan.scalars[name]!r}" if spec.shape is None and name in plan.scalars else ""
            value = " = per workload" if name in plan.varying else value
            kind = role if not spec.optional else "input (optional" + (", left out)" if name in plan.omitted else ")")
            rows.append(f"| {name} | {kind} | {shape(spec)}{value} | {spec.dtype} |")
    if definition.constraints:
        rows += ["", "Constraints: " + "; ".join(f"`{c}`" for c in definition.constraints)]
    if plan.given:
        parts = [f"the axis `{workload_axis(definition)}` numbers them"]
        if plan.recorded:
            parts.append(
                f"their safetensors inputs are the recorded tensors, kept in `{DATA_FILE}`, the same in every draw"
            )
        if plan.varying:
            parts.append(f"each gets its own {', '.join(f'`{name}`' for name in plan.varying)}")
        rows += ["", "The workloads' inputs differ beyond their axes: " + "; ".join(parts) + "."]
    return "\n".join(rows) + "\n"


def problem_files(
    definition: Definition,
    workloads: list[Trace],
    *,
    convention: str = "destination",
    level: int | None = None,
    definition_path: str = "definition",
    workloads_path: str = "workloads",
    roots: list[Path] | None = None,
) -> tuple[dict[str, str], list[str]]:
    """The files of the gpuarena problem for a definition and its workloads, and notes. A
    relative safetensors path is looked for under each of `roots` (flashinfer_data.dataset_roots)."""
    if convention not in ("destination", "return"):
        raise GpuarenaError(f"convention must be destination or return, not {convention!r}")
    if not workloads:
        raise FormatError(workloads_path, None, "holds no workloads", "give at least one workload")
    plan = _plan(definition, workloads, definition_path, workloads_path, roots or [Path(workloads_path).parent])
    level = level or (2 if "fused" in definition.tags else 1)
    sidecar = ProblemSidecar(
        definition=definition,
        scalars=plan.scalars,
        omitted=plan.omitted,
        cpu_smoke=plan.cpu_smoke,
        workload_axis=workload_axis(definition) if plan.given else None,
        workload_inputs=plan.given,
    )
    files = {
        PROBLEM_FILE: _problem_toml(definition, plan, convention, level),
        REFERENCE_FILE: reference_py(definition, plan.dtype),
        SIDECAR: sidecar.model_dump_json(indent=2) + "\n",
        "README.md": _readme(definition, plan),
    }
    if plan.recorded:
        files[DATA_FILE] = RecordedInputs(tensors=plan.recorded).model_dump_json() + "\n"
        size = sum(len(text) for text in files.values())
        if size > MAX_PROBLEM_BYTES:
            plan.notes.append(
                f"the recorded safetensors inputs make the problem {size} bytes of text, more than a packed "
                f"problem holds ({MAX_PROBLEM_BYTES}): it runs from its folder, but cannot be sent to a server"
            )
    return files, plan.notes
