"""gpuarena into FlashInfer-Trace: Evaluation records as Trace lines, an imported problem as
its Definition and workloads again, a gpuarena solution as a FlashInfer Solution.

Statuses map as follows (FlashInfer-Trace has fewer):

| gpuarena | FlashInfer-Trace |
| --- | --- |
| PASSED | PASSED |
| COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT | the same |
| WRONG_SHAPE / WRONG_DTYPE / WRONG_VALUES | INCORRECT_SHAPE / INCORRECT_DTYPE / INCORRECT_NUMERICAL |
| REJECTED | RUNTIME_ERROR (the log says REJECTED and why) |
| SKIPPED | no trace: the workload did not run |

A run that failed before any workload (a COMPILE_ERROR, say) has a trace for every workload
of the problem on that device kind, all with the run's status. The CPU smoke workload an
import may add (gpuarena's alone) has no trace.

Correctness: `max_absolute_error` is gpuarena's; `max_relative_error` is gpuarena's
max |out - ref| / max(|ref|, atol), which differs from FlashInfer-Bench's |out - ref| / (|ref| +
1e-8) near zero; `extra` keeps gpuarena's status, relative L2 error and float64 figures.
Performance: FlashInfer-Trace's latencies are means over calls; the export gives gpuarena's
means (`statistic="median"` gives medians), and speedup_factor is their ratio. A PASSED record
from `--mode test` carries no timing; FlashInfer-Trace requires performance for PASSED, so
its figures are 0 and the log says the run was not timed.
"""

from __future__ import annotations

import inspect
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import pydantic

from gpuarena.contracts.records import Evaluation, WorkloadResult
from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.interop import flashinfer_reader, gpumode_solution, kernelbench_solution  # noqa: F401  (their readers)
from gpuarena.interop.flashinfer_problem import workload_dtype
from gpuarena.interop.flashinfer_sidecar import (
    ADAPTER_FILE,
    ADAPTER_HEADER,
    UnsupportedFeature,
    flashinfer_language,
    read_problem_sidecar,
    read_solution_sidecar,
    reference_block,
)
from gpuarena.interop.flashinfer_trace import (
    BuildSpec,
    Correctness,
    Definition,
    Performance,
    RandomInput,
    ScalarInput,
    Solution,
    SourceFile,
    Trace,
    TraceEnvironment,
    TraceEvaluation,
    Workload,
)
from gpuarena.problems.loader import PROBLEM_FILE, REFERENCE_FILE, Problem
from gpuarena.solutions.loader import load_solution
from gpuarena.solutions.model import COMPILED_LANGUAGES
from gpuarena.solutions.model import Solution as GpuarenaSolution

STATUS = {
    "PASSED": "PASSED",
    "COMPILE_ERROR": "COMPILE_ERROR",
    "RUNTIME_ERROR": "RUNTIME_ERROR",
    "TIMEOUT": "TIMEOUT",
    "WRONG_SHAPE": "INCORRECT_SHAPE",
    "WRONG_DTYPE": "INCORRECT_DTYPE",
    "WRONG_VALUES": "INCORRECT_NUMERICAL",
    "REJECTED": "RUNTIME_ERROR",
    "ERROR": "RUNTIME_ERROR",
}
"""gpuarena status -> FlashInfer-Trace status (SKIPPED workloads are not exported)."""


# -- definitions and workloads -----------------------------------------------------------------


def export_definition(problem: Problem) -> tuple[Definition, list[Trace]]:
    """The Definition and workloads of a problem imported with `gpuarena import flashinfer`,
    as its folder now says: the workloads of problem.toml (but the import's CPU smoke workload),
    checked against the definition kept in flashinfer.json."""
    sidecar = read_problem_sidecar(problem.path)
    if sidecar is None:
        raise GpuarenaError(
            f"{problem.id}: not imported from FlashInfer-Trace (no flashinfer.json); "
            "only imported problems have a Definition to export"
        )
    definition = sidecar.definition
    toml = problem.path / PROBLEM_FILE
    block = reference_block(problem.reference_source, problem.path / REFERENCE_FILE)
    if block.rstrip("\n") != definition.reference.rstrip("\n"):
        raise FormatError(
            problem.path / REFERENCE_FILE,
            None,
            "its FlashInfer reference differs from the definition's in flashinfer.json, so the "
            "definition would not describe what the problem runs",
            "undo the edit, or import the edited definition again",
        )
    if problem.spec.outputs != list(definition.outputs):
        raise FormatError(
            toml,
            "outputs",
            f"are {problem.spec.outputs}; the definition's are {list(definition.outputs)}",
            "import the definition again",
        )
    dtype = workload_dtype([spec.dtype for spec in definition.outputs.values()])
    index_axis = sidecar.workload_axis
    entries = []
    for w in problem.spec.workloads:
        if w.name == sidecar.cpu_smoke:
            continue
        where = f"workload {w.name}"
        if w.dtype != dtype:
            raise FormatError(
                toml,
                f"{where}.dtype",
                f"is {w.dtype}; the definition's dtype is {dtype}",
                "FlashInfer-Trace definitions fix their dtypes",
            )
        for axis, value in definition.const_axes.items():
            if w.axes.get(axis, value) != value:
                raise FormatError(
                    toml,
                    f"{where}.axes.{axis}",
                    f"is {w.axes[axis]}; the axis is constant ({value})",
                    "a definition has one size for a constant axis",
                )
        unknown = [a for a in w.axes if a not in definition.axes and a != index_axis]
        missing = [a for a in definition.var_axes if a not in w.axes]
        if unknown or missing:
            raise FormatError(
                toml, f"{where}.axes", f"unknown axes {unknown}, missing {missing}", "give the definition's axes"
            )
        inputs: dict[str, Any] = {
            name: ScalarInput(value=sidecar.scalars[name]) if spec.shape is None else RandomInput()
            for name, spec in definition.inputs.items()
            if name not in sidecar.omitted
        }
        if index_axis is not None and index_axis in w.axes:  # the workload's own inputs, as given
            index = w.axes[index_axis]
            if not 0 <= index < len(sidecar.workload_inputs):
                raise FormatError(
                    toml,
                    f"{where}.axes.{index_axis}",
                    f"is {index}; the import numbered {len(sidecar.workload_inputs)} workloads",
                    "keep the numbers the import wrote",
                )
            inputs = dict(sidecar.workload_inputs[index])
        workload = Workload(uuid=w.name, axes={a: w.axes[a] for a in definition.var_axes}, inputs=inputs)
        entries.append(Trace(definition=definition.name, workload=workload))
    return definition, entries


def _native_workload(problem: Problem, name: str, axes: dict[str, int]) -> Workload:
    """A workload of a problem written for gpuarena: its axes, and every input random."""
    inputs: dict[str, Any] = {}
    for parameter in inspect.signature(problem.reference).parameters.values():
        if parameter.annotation in (int, float, bool, "int", "float", "bool"):
            raise UnsupportedFeature(
                problem.path / REFERENCE_FILE,
                "scalar inputs of problems not imported from FlashInfer-Trace",
                f"input {parameter.name!r}: its value is decided by make_inputs()",
                target="a FlashInfer-Trace workload",
            )
        inputs[parameter.name] = RandomInput()
    return Workload(uuid=name, axes=dict(axes), inputs=inputs)


# -- traces ----------------------------------------------------------------------------------


def read_evaluations(path: Path | str) -> list[Evaluation]:
    """One Evaluation record (`gpuarena run --json`), or a JSON list of them."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, "not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(
            path, None, f"is not valid JSON: {exc.msg} (line {exc.lineno})", "give `gpuarena run --json`'s output"
        ) from None
    records = data if isinstance(data, list) else [data]
    out = []
    for index, item in enumerate(records):
        try:
            out.append(Evaluation.model_validate(item))
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first["loc"])
            raise FormatError(
                path,
                (f"[{index}]." if isinstance(data, list) else "") + loc,
                first["msg"],
                "give `gpuarena run --json`'s output",
            ) from None
    return out


def _environment(record: Evaluation) -> TraceEnvironment:
    env = record.environment
    if env is None:
        return TraceEnvironment(hardware=record.device or "unknown")
    libs = {"torch": env.torch_version, "python": env.python_version, "gpuarena-harness": env.harness_version}
    if env.triton_version:
        libs["triton"] = env.triton_version
    if env.cuda_runtime:
        libs["cuda"] = env.cuda_runtime
    return TraceEnvironment(hardware=env.device_name or env.device, libs=libs)


def _ms(timing: Any, statistic: str) -> float:
    value = timing.mean_us if statistic == "mean" and timing.mean_us is not None else timing.median_us
    return value / 1000.0


def _evaluation(
    record: Evaluation, result: WorkloadResult | None, status: str, reason: str, statistic: str
) -> TraceEvaluation:
    mapped = STATUS[status]
    lines = [f"gpuarena {status}" + (f": {reason}" if reason else "")]
    correctness = performance = None
    if mapped in ("PASSED", "INCORRECT_NUMERICAL"):
        extra: dict[str, Any] = {"gpuarena_status": status}
        if result is not None:
            for key in ("l2_rel_error", "error_vs_float64", "reference_error_vs_float64", "trials"):
                if getattr(result, key) not in (None, ""):
                    extra[key] = getattr(result, key)
        nan = float("nan")
        correctness = Correctness(
            max_absolute_error=nan if result is None or result.max_abs_error is None else result.max_abs_error,
            max_relative_error=nan if result is None or result.max_rel_error is None else result.max_rel_error,
            extra=extra,
        )
    if mapped == "PASSED":
        if result is not None and result.time is not None and result.reference_time is not None:
            latency, reference = _ms(result.time, statistic), _ms(result.reference_time, statistic)
            performance = Performance(
                latency_ms=latency,
                reference_latency_ms=reference,
                speedup_factor=reference / latency if latency > 0 else 0.0,
            )
        else:
            performance = Performance()
            lines.append(f"gpuarena: not timed ({record.mode} mode): the performance figures are 0")
    if record.environment is not None and record.environment.triton_interpret:
        lines.append("gpuarena: TRITON_INTERPRET=1 (Triton ran in the interpreter on the CPU)")
    log = "\n".join(lines) + ("\n" + record.log if record.log else "")
    return TraceEvaluation(
        status=mapped,
        environment=_environment(record),
        timestamp=record.started_at or datetime.now(UTC).isoformat(timespec="seconds"),
        log=log,
        correctness=correctness,
        performance=performance,
    )


def traces_from_evaluation(
    record: Evaluation,
    problem: Problem,
    *,
    solution_name: str | None = None,
    definition_name: str | None = None,
    statistic: Literal["mean", "median"] = "mean",
) -> list[Trace]:
    """One Trace per workload the record judged (SKIPPED ones left out; for a run that failed
    before its first workload, one per workload of the problem on the record's device kind)."""
    sidecar = read_problem_sidecar(problem.path)
    if sidecar is not None:
        definition, entries = export_definition(problem)
        name = definition_name or definition.name
        workloads = {e.workload.uuid: e.workload for e in entries}
    else:
        name = definition_name or problem.spec.name
        workloads = {w.name: _native_workload(problem, w.name, w.axes) for w in problem.spec.workloads}
    solution = solution_name or record.solution_name or record.solution_hash[:12]
    kind = "cuda" if record.device.startswith("cuda") else "cpu"
    judged: list[tuple[str, WorkloadResult | None, str, str]] = [
        (r.name, r, r.status.value, r.reason) for r in record.workloads if r.status.value != "SKIPPED"
    ]
    if not record.workloads and record.status.value != "PASSED":
        judged = [(w.name, None, record.status.value, record.reason) for w in problem.spec.workloads_for(kind)]
    traces = []
    for workload_name, result, status, reason in judged:
        if sidecar is not None and workload_name == sidecar.cpu_smoke:
            continue
        if workload_name not in workloads:
            raise GpuarenaError(
                f"the record judged workload {workload_name!r}, which {problem.id} does not have "
                "(give the problem the record was made with)"
            )
        traces.append(
            Trace(
                definition=name,
                workload=workloads[workload_name],
                solution=solution,
                evaluation=_evaluation(record, result, status, reason, statistic),
            )
        )
    return traces


# -- solutions -------------------------------------------------------------------------------


def _adapter_info(text: str) -> tuple[str, bool] | None:
    lines = text.split("\n")
    if not lines or lines[0] != ADAPTER_HEADER:
        return None
    entry = lines[1].removeprefix("# flashinfer-entry-point: ").strip()
    style = lines[2].removeprefix("# flashinfer-destination-passing-style: ").strip()
    return entry, style == "true"


def pack_solution(
    path: Path | str,
    *,
    problem: Problem | None = None,
    name: str | None = None,
    author: str | None = None,
    definition: str | None = None,
    description: str | None = None,
    target_hardware: list[str] | None = None,
) -> Solution:
    """A gpuarena solution (file, folder or pack) as a FlashInfer Solution. Metadata comes from
    the arguments, else from an imported solution's flashinfer.json, else from the solution and
    problem. The sources are the solution's (but the import's adapter), so the content hash
    (flashinfer_trace.sources_hash) is kept both ways."""
    solution: GpuarenaSolution = load_solution(path)
    meta = read_solution_sidecar(path) or {}
    meta_spec = meta.get("spec", {})
    manifest = solution.manifest
    if manifest.build.extra_cflags or manifest.build.extra_cuda_cflags or manifest.build.extra_ldflags:
        raise UnsupportedFeature(
            path,
            "compiler flags",
            "its spec has no build flags; remove them from the build table of solution.toml",
            target="a FlashInfer-Trace Solution",
        )
    sources = dict(solution.sources)
    adapter = _adapter_info(sources.get(ADAPTER_FILE, ""))
    if adapter is not None:
        del sources[ADAPTER_FILE]
        entry_point, destination = adapter
    else:
        if manifest.language in COMPILED_LANGUAGES:
            compiled = [n for n in sources if n.endswith((".cu", ".cpp", ".cc", ".cxx"))]
            marker = "PYBIND11_MODULE" if manifest.language == "cuda" else "TVM_FFI_DLL_EXPORT"
            bound = [n for n in compiled if marker in sources[n]]
            entry_point = f"{(bound or compiled or list(sources))[0]}::{manifest.entry_point}"
        else:
            file, _, function = manifest.entry_point.partition(":")
            entry_point = f"{file}::{function or 'solve'}"
        if manifest.convention is not None:  # the solution's own, where it differs from its problem's
            destination = manifest.convention == "destination"
        elif problem is not None:
            destination = problem.spec.convention == "destination"
        elif "destination_passing_style" in meta_spec:
            destination = bool(meta_spec["destination_passing_style"])
        else:
            raise GpuarenaError(
                "give the problem: its convention says whether the solution writes into its "
                "outputs (destination_passing_style)"
            )
    sidecar = read_problem_sidecar(problem.path) if problem is not None else None
    definition_name = (
        definition
        or meta.get("definition")
        or (sidecar.definition.name if sidecar else None)
        or (problem.spec.name if problem else None)
    )
    if not definition_name:
        raise GpuarenaError("give the definition's name (or the problem)")
    language, binding = flashinfer_language(manifest.language, list(sources))
    if meta_spec.get("language") == language and meta_spec.get("binding", binding) in (None, binding):
        binding = meta_spec.get("binding")  # left out where it was (tvm-ffi is the spec's default)
    spec = BuildSpec(
        language=language,
        target_hardware=target_hardware
        or meta_spec.get("target_hardware")
        or (["cpu", "cuda"] if language == "python" else ["cuda"]),
        entry_point=entry_point,
        dependencies=meta_spec.get("dependencies", []),
        destination_passing_style=destination,
        binding=binding,
    )
    empty = [n for n, text in sources.items() if not text]
    if empty:
        raise UnsupportedFeature(
            path, "empty source files", f"{', '.join(empty)} is empty", target="a FlashInfer-Trace Solution"
        )
    return Solution(
        name=name or meta.get("name") or solution.name,
        definition=definition_name,
        author=author or meta.get("author") or "anonymous",
        spec=spec,
        sources=[SourceFile(path=p, content=text) for p, text in sources.items()],
        description=description or meta.get("description"),
    )
