"""gpuarena Evaluation records -> FlashInfer-Trace Trace lines."""

from __future__ import annotations

import json
import math

import pytest

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.contracts.records import Environment, Evaluation, Timing, WorkloadResult
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import STATUS, read_evaluations, traces_from_evaluation
from gpuarena.interop.flashinfer_import import import_solution
from gpuarena.problems import resolve_problem
from gpuarena.solutions import load_solution

from .conftest import RMSNORM, ROOT


def _environment() -> Environment:
    return Environment(
        device="cuda:0",
        device_name="NVIDIA H100 80GB HBM3",
        torch_version="2.8.0",
        triton_version="3.4.0",
        cuda_runtime="12.8",
        python_version="3.11.7",
        cpu_model="x",
        hostname="h",
    )


def _timing(median: float, mean: float) -> Timing:
    return Timing(
        median_us=median, mean_us=mean, ci95_low_us=median, ci95_high_us=median, samples=10, method="cupti-device-time"
    )


def _record(problem, results, status="PASSED", mode="benchmark", **fields) -> Evaluation:
    return Evaluation(
        status=status,
        problem=problem.id,
        solution_hash="ab" * 32,
        solution_name="mine",
        device="cuda:0",
        mode=mode,
        workloads=results,
        environment=_environment(),
        started_at="2026-01-02T03:04:05+00:00",
        log="built ok\n",
        **fields,
    )


def _result(problem, index, status="PASSED", **fields) -> WorkloadResult:
    w = problem.spec.workloads[index]
    return WorkloadResult(name=w.name, status=status, axes=w.axes, dtype=w.dtype, **fields)


def test_every_status_maps_to_a_flashinfer_status(rmsnorm_problem):
    for status, mapped in STATUS.items():
        fields = dict(max_abs_error=0.5, max_rel_error=0.25) if status in ("PASSED", "WRONG_VALUES") else {}
        record = _record(
            rmsnorm_problem, [_result(rmsnorm_problem, 0, status, reason="why", **fields)], status=status, mode="test"
        )
        (trace,) = traces_from_evaluation(record, rmsnorm_problem)
        assert trace.evaluation.status == mapped
        assert trace.evaluation.log.startswith(f"gpuarena {status}: why")
        assert (trace.evaluation.correctness is not None) == (mapped in ("PASSED", "INCORRECT_NUMERICAL"))


def test_skipped_workloads_have_no_trace(rmsnorm_problem):
    record = _record(
        rmsnorm_problem,
        [
            _result(rmsnorm_problem, 0, "RUNTIME_ERROR", reason="boom"),
            _result(rmsnorm_problem, 1, "SKIPPED"),
            _result(rmsnorm_problem, 2, "SKIPPED"),
        ],
        status="RUNTIME_ERROR",
    )
    traces = traces_from_evaluation(record, rmsnorm_problem)
    assert [t.workload.uuid for t in traces] == [rmsnorm_problem.spec.workloads[0].name]


def test_a_run_that_failed_before_any_workload_has_a_trace_per_workload(rmsnorm_problem):
    record = _record(rmsnorm_problem, [], status="COMPILE_ERROR", reason="SyntaxError")
    traces = traces_from_evaluation(record, rmsnorm_problem)
    assert [t.evaluation.status for t in traces] == ["COMPILE_ERROR"] * 3
    assert all(t.evaluation.correctness is None and t.evaluation.performance is None for t in traces)


def test_timed_results_give_performance_from_means_or_medians(rmsnorm_problem):
    result = _result(
        rmsnorm_problem,
        1,
        max_abs_error=1e-6,
        max_rel_error=2e-6,
        l2_rel_error=3e-7,
        time=_timing(10.0, 12.0),
        reference_time=_timing(30.0, 36.0),
        speedup=3.0,
    )
    record = _record(rmsnorm_problem, [result])
    (trace,) = traces_from_evaluation(record, rmsnorm_problem)
    performance = trace.evaluation.performance
    assert performance.latency_ms == pytest.approx(0.012) and performance.reference_latency_ms == pytest.approx(0.036)
    assert performance.speedup_factor == pytest.approx(3.0)
    (median,) = traces_from_evaluation(record, rmsnorm_problem, statistic="median")
    assert median.evaluation.performance.latency_ms == pytest.approx(0.010)
    correctness = trace.evaluation.correctness
    assert (correctness.max_absolute_error, correctness.max_relative_error) == (1e-6, 2e-6)
    assert correctness.extra["l2_rel_error"] == 3e-7 and correctness.extra["gpuarena_status"] == "PASSED"
    environment = trace.evaluation.environment
    assert environment.hardware == "NVIDIA H100 80GB HBM3"
    assert environment.libs["torch"] == "2.8.0" and environment.libs["cuda"] == "12.8"
    assert trace.evaluation.timestamp == "2026-01-02T03:04:05+00:00"
    assert trace.solution == "mine" and trace.definition == "rmsnorm_h256"
    assert trace.workload == fit.read_workloads(RMSNORM / "workloads.jsonl")[1].workload


def test_an_untimed_pass_says_so(rmsnorm_problem):
    record = _record(rmsnorm_problem, [_result(rmsnorm_problem, 0, max_abs_error=0.0, max_rel_error=0.0)], mode="test")
    (trace,) = traces_from_evaluation(record, rmsnorm_problem)
    assert trace.evaluation.performance == fit.Performance(latency_ms=0.0, reference_latency_ms=0.0, speedup_factor=0.0)
    assert "not timed (test mode)" in trace.evaluation.log


def test_an_unmeasured_error_is_nan_and_survives_the_file(rmsnorm_problem, tmp_path):
    record = _record(
        rmsnorm_problem, [_result(rmsnorm_problem, 0, "WRONG_VALUES", reason="NaN in output")], status="WRONG_VALUES"
    )
    path = tmp_path / "t.jsonl"
    fit.write_jsonl(traces_from_evaluation(record, rmsnorm_problem), path)
    (back,) = fit.read_traces(path)
    assert math.isnan(back.evaluation.correctness.max_absolute_error)


@pytest.fixture(scope="module")
def real_records(rmsnorm_problem, tmp_path_factory):
    """Records made by the real harness on the CPU: an imported honest solution timed briefly,
    an imported wrong one, and a bundled problem's example."""
    base = tmp_path_factory.mktemp("records")
    honest = import_solution(RMSNORM / "solutions" / "python_returning.json", rmsnorm_problem, base / "honest")
    wrong = import_solution(RMSNORM / "solutions" / "python_wrong.json", rmsnorm_problem, base / "wrong")
    options = dict(device="cpu", timeout_s=120.0, budget_s=0.1)
    softmax = resolve_problem("level1/softmax")
    return {
        "timed": evaluate(rmsnorm_problem, load_solution(honest), RunOptions(mode="benchmark", **options)),
        "wrong": evaluate(rmsnorm_problem, load_solution(wrong), RunOptions(mode="test", **options)),
        "native": evaluate(
            softmax,
            load_solution(ROOT / "examples" / "softmax" / "pytorch.py"),
            RunOptions(mode="test", workloads=["small-64x1000"], **options),
        ),
    }


@pytest.mark.harness
def test_real_records_export_and_read_back(real_records, rmsnorm_problem, tmp_path):
    timed = traces_from_evaluation(real_records["timed"], rmsnorm_problem, solution_name="rmsnorm_torch_steps")
    assert [t.evaluation.status for t in timed] == ["PASSED"] * 3
    assert all(t.evaluation.performance.latency_ms > 0 and t.evaluation.performance.speedup_factor > 0 for t in timed)
    wrong = traces_from_evaluation(real_records["wrong"], rmsnorm_problem)
    assert wrong[0].evaluation.status == "INCORRECT_NUMERICAL" and wrong[0].evaluation.performance is None
    assert wrong[0].evaluation.correctness.max_absolute_error > 0.1
    path = tmp_path / "traces.jsonl"
    fit.write_jsonl(timed + wrong, path)
    assert fit.read_traces(path) == timed + wrong
    for line in path.read_text().splitlines():
        assert list(json.loads(line)) == ["definition", "solution", "workload", "evaluation"]


def test_a_bundled_problem_exports_with_its_own_workload_names(real_records):
    record = real_records["native"]
    assert record.status == "PASSED"
    (trace,) = traces_from_evaluation(record, resolve_problem("level1/softmax"))
    assert trace.definition == "softmax" and trace.workload.uuid == "small-64x1000"
    assert trace.workload.axes == {"rows": 64, "cols": 1000}
    assert trace.workload.inputs == {"x": fit.RandomInput()}


def test_records_are_read_from_files_with_clear_errors(real_records, tmp_path):
    one, many, bad = tmp_path / "one.json", tmp_path / "many.json", tmp_path / "bad.json"
    one.write_text(real_records["wrong"].model_dump_json())
    many.write_text(json.dumps([json.loads(r.model_dump_json()) for r in real_records.values()]))
    bad.write_text(json.dumps({"status": "PASSED"}))
    assert len(read_evaluations(one)) == 1 and len(read_evaluations(many)) == 3
    with pytest.raises(Exception, match="bad.json: field 'problem'"):
        read_evaluations(bad)
