"""What gpuarena writes, read by FlashInfer-Bench's own models and JSON loaders (skipped where
its package `flashinfer-bench` is not installed: `pip install flashinfer-bench --no-deps`)."""

from __future__ import annotations

from gpuarena.contracts.records import Environment, Evaluation, WorkloadResult
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import export_definition, pack_solution, traces_from_evaluation
from gpuarena.interop.flashinfer_import import import_solution
from gpuarena.problems import resolve_problem

from .conftest import RMSNORM, ROOT, SOFTMAX


def test_our_fixtures_are_valid_for_flashinfer_bench(fib):
    for fixture in (RMSNORM, SOFTMAX):
        ours = fit.read_definition(fixture / "definition.json")
        theirs = fib.load_json_file(fib.Definition, fixture / "definition.json")
        assert (theirs.name, list(theirs.inputs), theirs.var_axes, theirs.const_axes) == (
            ours.name,
            list(ours.inputs),
            ours.var_axes,
            ours.const_axes,
        )
        assert len(fib.load_jsonl_file(fib.Trace, fixture / "workloads.jsonl")) == len(
            fit.read_workloads(fixture / "workloads.jsonl")
        )
    for path in sorted((RMSNORM / "solutions").glob("*.json")):
        assert fib.load_json_file(fib.Solution, path).name == fit.read_solution(path).name


def test_exported_definitions_and_workloads_load_in_flashinfer_bench(fib, rmsnorm_problem, softmax_problem, tmp_path):
    for problem in (rmsnorm_problem, softmax_problem):
        definition, workloads = export_definition(problem)
        (tmp_path / "d.json").write_text(fit.to_json(definition))
        fit.write_jsonl(workloads, tmp_path / "w.jsonl")
        theirs = fib.load_json_file(fib.Definition, tmp_path / "d.json")
        assert theirs.reference == definition.reference and list(theirs.outputs) == list(definition.outputs)
        loaded = fib.load_jsonl_file(fib.Trace, tmp_path / "w.jsonl")
        assert [t.workload.uuid for t in loaded] == [t.workload.uuid for t in workloads]
        assert all(t.solution is None and t.evaluation is None for t in loaded)
        # FlashInfer-Bench's own shape inference agrees with the gpuarena workloads
        for trace, workload in zip(loaded, problem.spec.workloads):
            shapes = theirs.get_input_shapes(trace.workload.axes)
            assert [list(s) if s is not None else None for s in shapes] == [
                [workload.axes[a] for a in spec.shape] if spec.shape is not None else None
                for spec in definition.inputs.values()
            ]


def test_packed_solutions_load_in_flashinfer_bench(fib, rmsnorm_problem, tmp_path):
    folder = import_solution(RMSNORM / "solutions" / "triton_dps.json", rmsnorm_problem, tmp_path / "s")
    for packed in (
        pack_solution(folder, problem=rmsnorm_problem),
        pack_solution(ROOT / "examples" / "softmax" / "pytorch.py", problem=resolve_problem("level1/softmax")),
    ):
        (tmp_path / "s.json").write_text(fit.to_json(packed))
        theirs = fib.load_json_file(fib.Solution, tmp_path / "s.json")
        assert theirs.spec.entry_point == packed.spec.entry_point
        assert theirs.spec.destination_passing_style == packed.spec.destination_passing_style
        assert {s.path: s.content for s in theirs.sources} == {s.path: s.content for s in packed.sources}


def test_exported_traces_load_in_flashinfer_bench(fib, rmsnorm_problem, tmp_path):
    environment = Environment(
        device="cpu",
        device_name="AMD EPYC",
        torch_version="2.8.0",
        python_version="3.11",
        cpu_model="AMD EPYC",
        hostname="h",
    )
    workloads = rmsnorm_problem.spec.workloads
    results = [
        WorkloadResult(name=workloads[0].name, status="PASSED", max_abs_error=1e-7, max_rel_error=1e-6),
        WorkloadResult(name=workloads[1].name, status="WRONG_VALUES", reason="NaN"),
        WorkloadResult(name=workloads[2].name, status="REJECTED", reason="modified an input"),
    ]
    record = Evaluation(
        status="WRONG_VALUES",
        problem=rmsnorm_problem.id,
        solution_hash="0" * 64,
        device="cpu",
        mode="test",
        workloads=results,
        environment=environment,
        started_at="2026-01-01T00:00:00+00:00",
    )
    traces = traces_from_evaluation(record, rmsnorm_problem, solution_name="s")
    fit.write_jsonl(traces, tmp_path / "t.jsonl")
    loaded = fib.load_jsonl_file(fib.Trace, tmp_path / "t.jsonl")
    assert [t.evaluation.status.value for t in loaded] == ["PASSED", "INCORRECT_NUMERICAL", "RUNTIME_ERROR"]
    assert loaded[0].evaluation.performance is not None and loaded[1].evaluation.performance is None
    assert loaded[0].evaluation.environment.hardware == "AMD EPYC"
