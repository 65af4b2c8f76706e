"""bench/peer_flashinfer.py without a GPU: the trace-set it writes (imported by gpuarena's own
importer, its plain-PyTorch solution run against the reference, loaded by FlashInfer-Bench's
models where that package is installed), the tables from a made-up result, and FlashInfer-Bench's
side end to end against a stand-in package (its Benchmark returns fixed traces), so the script
cannot rot unnoticed between GPU runs."""

from __future__ import annotations

import importlib
import importlib.util
import json
import signal
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_peer_flashinfer", ROOT / "bench" / "peer_flashinfer.py")
assert _spec is not None and _spec.loader is not None
pf = importlib.util.module_from_spec(_spec)
sys.modules["bench_peer_flashinfer"] = pf
_spec.loader.exec_module(pf)
# its parts in bench/ (the script put bench/ on sys.path): the same modules the script imported
fp = importlib.import_module("peer_flashinfer_problems")
fib_side = importlib.import_module("peer_flashinfer_fib")


def test_arguments():
    with pytest.raises(SystemExit) as exit_:
        pf.main(["--help"])
    assert exit_.value.code == 0
    assert fp.definition_names(None) == list(fp.problems())
    assert fp.definition_names(" gemm_bf16_n1024_k4096,gemm_bf16_n1024_k4096") == ["gemm_bf16_n1024_k4096"]
    with pytest.raises(SystemExit):
        fp.definition_names("not_one")


def test_trace_set_layout_and_fixed_uuids(tmp_path):
    chosen = fp.problems()
    root = fp.write_trace_set(tmp_path / "ts", chosen)
    for name, p in chosen.items():
        files = fp.paths_of(root, p)
        assert all(path.is_file() for path in files.values())
        definition, workloads, solution = fp.load_documents(root, name)
        assert definition == p["definition"] and solution == p["solution"]
        assert [w["workload"]["uuid"] for w in workloads] == [w["workload"]["uuid"] for w in p["workloads"]]
        assert solution["spec"]["destination_passing_style"] and len(solution["sources"]) == 1
    # the same documents, the same workload names, run after run
    assert [w["workload"]["uuid"] for p in fp.problems().values() for w in p["workloads"]] == [
        w["workload"]["uuid"] for p in chosen.values() for w in p["workloads"]
    ]


def test_gpuarena_imports_the_trace_set(tmp_path):
    from gpuarena.interop.flashinfer_import import import_definition, import_solution
    from gpuarena.problems import load_problem

    chosen = fp.problems()
    root = fp.write_trace_set(tmp_path / "ts", chosen)
    for name, p in chosen.items():
        files = fp.paths_of(root, p)
        # checked on the CPU by the importer's own run (`gpuarena run --device cpu` in the script's
        # --device cpu mode): here only read, verified and written, to stay fast
        import_definition(files["definition"], files["workloads"], tmp_path / name, check_device=None)
        problem = load_problem(tmp_path / name)
        cuda = [w.name for w in problem.spec.workloads if "cuda" in w.devices]
        assert cuda == [w["workload"]["uuid"] for w in p["workloads"]]
        assert any("cpu" in w.devices for w in problem.spec.workloads)  # --device cpu has a workload
        assert (import_solution(files["solution"], problem, tmp_path / f"{name}-solution") / "solution.toml").is_file()


def test_the_pytorch_solution_matches_its_reference_on_the_cpu(tmp_path):
    import torch

    root = fp.write_trace_set(tmp_path / "ts", fp.problems())
    name = "gemm_bf16_n1024_k4096"
    definition, workloads, solution = fp.load_documents(root, name)
    entry = fp.load_entry(solution, tmp_path / "sources")
    workload = dict(workloads[0]["workload"], axes={"M": 8})
    arguments = fp.draw_arguments(definition, workload, "cpu")
    assert [tuple(a.shape) for a in arguments] == [(8, 4096), (1024, 4096), (8, 1024)]
    assert all(a.dtype == torch.bfloat16 for a in arguments)
    context: dict = {}
    exec(definition["reference"], context)
    entry(*arguments)
    torch.testing.assert_close(arguments[-1], context["run"](*arguments[:-1]))


def test_flashinfer_benchs_models_load_it(tmp_path):
    """Its pydantic models read each document; where its whole package imports (docstring-parser
    and safetensors there), its own TraceSet.from_path reads the folder as the bench's child does."""
    from interop.conftest import _flashinfer_bench_data  # tests/interop's: the schema models alone if need be

    fib = _flashinfer_bench_data()  # skips where flashinfer-bench is not installed
    root = fp.write_trace_set(tmp_path / "ts", fp.problems())
    for name, p in fp.problems().items():
        files = fp.paths_of(root, p)
        definition = fib.load_json_file(fib.Definition, files["definition"])
        assert (definition.name, list(definition.outputs)) == (name, ["output"])
        solution = fib.load_json_file(fib.Solution, files["solution"])
        assert solution.definition == name and solution.spec.destination_passing_style
        traces = fib.load_jsonl_file(fib.Trace, files["workloads"])
        assert [t.workload.uuid for t in traces] == [w["workload"]["uuid"] for w in p["workloads"]]
        for trace in traces:  # its own shape inference gives every input a shape or a scalar
            assert len(definition.get_input_shapes(trace.workload.axes)) == len(definition.inputs)
    if not fib.whole_package:
        return
    loaded = fib_side.validate_with_flashinfer_bench(root)
    assert loaded.get("error") is None, loaded
    assert loaded["definitions"] == sorted(fp.problems())
    assert loaded["workloads"] == {n: len(p["workloads"]) for n, p in fp.problems().items()}


def _made_up() -> dict:
    p = fp.problems()["rms_norm_bf16_h4096"]
    big, small = (w["workload"]["uuid"] for w in p["workloads"])
    trace = {"status": "PASSED", "reference_latency_us": 40.0, "max_absolute_error": 0.06}
    return {
        "device": "NVIDIA H200",
        "date": "2026-11-30",
        "command": "python3 bench/peer_flashinfer.py --repeat 2",
        "flashinfer_bench": "0.1.2",
        "repeat": 2,
        "ncu": "/usr/local/cuda/bin/ncu",
        "definitions": [
            {
                "name": "rms_norm_bf16_h4096",
                "solution": p["solution"]["name"],
                "language": "triton",
                "workloads": [{"uuid": w["workload"]["uuid"], "axes": w["workload"]["axes"]} for w in p["workloads"]],
                "flashinfer_bench": [
                    {
                        "wall_s": w,
                        "status": "PASSED",
                        "import_s": 2.0,
                        "run_s": w - 3,
                        "traces": [
                            trace | {"workload": big, "latency_us": 24.0},
                            trace | {"workload": small, "latency_us": 6.0},
                        ],
                    }
                    for w in (20.0, 22.0)
                ],
                "gpuarena": [
                    {
                        "wall_s": 11.0,
                        "status": "PASSED",
                        "phases": {"build": 1.0},
                        "workloads": [
                            {"name": big, "status": "PASSED", "median_us": 22.0, "kernel_duration_us": 21.0},
                            {"name": small, "status": "PASSED", "median_us": 4.0, "kernel_duration_us": 3.5},
                        ],
                    },
                    {"wall_s": None, "error": "timed out after 300 s", "stderr": "Traceback\nKilled"},
                ],
                "ncu": {
                    big: {"us": 20.0, "kernels_per_call": 1, "kernels": ["_rms_rows"]},
                    small: {"error": "no rows"},
                },
                "import": "$ gpuarena import flashinfer ...",
            },
            {
                "name": "x",
                "solution": "s",
                "language": "python",
                "workloads": [],
                "flashinfer_bench": [],
                "gpuarena": [],
                "ncu": {},
                "error": "not imported",
            },
        ],
    }


def test_tables_from_a_made_up_result():
    result = _made_up()
    big = result["definitions"][0]["workloads"][0]["uuid"]
    s = pf.summarize(result["definitions"][0])
    assert s["fib_wall_s"] == 21.0 and s["ga_wall_s"] == 11.0 and s["wall_ga_over_fib"] == pytest.approx(11 / 21)
    w = s["workloads"][big]
    assert (w["fib_latency_us"], w["ga_median_us"], w["ncu_us"]) == (24.0, 22.0, 20.0)
    assert w["fib_over_ncu"] == pytest.approx(1.2) and w["ga_record_ncu_over_ncu"] == pytest.approx(1.05)
    md = pf.markdown(result)
    assert (
        "| rms_norm_bf16_h4096 | num_tokens=4096 | PASSED, PASSED | 24.0 | 40.0 | PASSED | 22.0 | 21.0 | 20.0 | 1.200"
        in md
    )
    assert "timed out after 300 s (stderr: Traceback / Killed)" in md and "- not run: not imported" in md
    json.dumps(result | {"summary": s})  # the JSON the script writes


FAKE_FIB = {
    "__init__.py": "",
    "data.py": """
        import json, pathlib, types

        class TraceSet:
            def __init__(self, root):
                self.root = pathlib.Path(root)
                self.workloads = {}
                for path in (self.root / "workloads").rglob("*.jsonl"):
                    rows = [json.loads(line) for line in path.read_text().splitlines()]
                    self.workloads[path.stem] = [types.SimpleNamespace(workload=types.SimpleNamespace(**r["workload"])) for r in rows]
                self.traces = {}

            @classmethod
            def from_path(cls, path):
                return cls(path)
        """,
    "bench.py": """
        import os, types

        class BenchmarkConfig:
            def __init__(self, **kw):
                self.__dict__.update(kw)

        class Benchmark:
            def __init__(self, trace_set, config):
                if os.environ.get("FAKE_FIB_NO_GPU"):
                    raise RuntimeError("No CUDA devices available")
                self.trace_set, self.config = trace_set, config

            def run_all(self, dump_traces=True, resume=False):
                name = self.config.definitions[0]
                traces = []
                for i, w in enumerate(self.trace_set.workloads[name]):
                    ok = i == 0
                    ev = types.SimpleNamespace(
                        status=types.SimpleNamespace(value="PASSED" if ok else "RUNTIME_ERROR"),
                        performance=types.SimpleNamespace(latency_ms=0.025, reference_latency_ms=0.05, speedup_factor=2.0)
                        if ok else None,
                        correctness=types.SimpleNamespace(max_absolute_error=0.0, max_relative_error=0.0) if ok else None,
                        environment=types.SimpleNamespace(hardware="FAKE"),
                        log="" if ok else "Traceback: it broke",
                    )
                    traces.append(types.SimpleNamespace(workload=w.workload, solution=self.config.solutions[0], evaluation=ev))
                self.trace_set.traces[name] = traces
                return self.trace_set

            def close(self):
                pass
        """,
}


def test_flashinfer_bench_side_against_a_stand_in(tmp_path, monkeypatch):
    package = tmp_path / "fake" / "flashinfer_bench"
    package.mkdir(parents=True)
    for file, text in FAKE_FIB.items():
        (package / file).write_text(textwrap.dedent(text))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fake"))
    root = fp.write_trace_set(tmp_path / "ts", fp.problems())
    name = "rms_norm_bf16_h4096"
    big, small = (w["workload"]["uuid"] for w in fp.problems()[name]["workloads"])
    row = pf.run_flashinfer_bench(root, name, f"{name}_triton", tmp_path / "scratch", timeout=120)
    assert row.get("error") is None, row
    assert row["status"] == "PASSED,RUNTIME_ERROR" and row["wall_s"] > 0
    assert [(t["workload"], t["status"], t["latency_us"]) for t in row["traces"]] == [
        (big, "PASSED", pytest.approx(25.0)),
        (small, "RUNTIME_ERROR", None),
    ]
    assert row["traces"][1]["log"] == "Traceback: it broke"
    assert not (root / "traces").exists()  # each verdict on its own copy of the trace-set

    monkeypatch.setenv("FAKE_FIB_NO_GPU", "1")
    row = pf.run_flashinfer_bench(root, name, f"{name}_triton", tmp_path / "scratch", timeout=120)
    assert row["error"] == "RuntimeError: No CUDA devices available" and row["traces"] == []


@pytest.mark.slow
def test_cpu_check_end_to_end(tmp_path):
    """--device cpu: the trace-set imported by `gpuarena import` (checked on the CPU) and the
    Triton solution, interpreted, PASSED by `gpuarena run --mode test` on the CPU workload."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:  # the bench takes SIGINT and SIGTERM over (its sides' process groups go with it)
        argv = ["--device", "cpu", "--definitions", "rms_norm_bf16_h4096", "--repeat", "1", "--out", str(tmp_path)]
        assert pf.main(argv) == 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    result = json.loads((tmp_path / "peer-flashinfer.json").read_text())
    (entry,) = result["definitions"]
    assert "import_error" not in entry, entry["import"]
    (run,) = entry["gpuarena"]
    assert run.get("status") == "PASSED", run
    assert [w["status"] for w in run["workloads"]] == ["PASSED"]  # the 128-token workload; 4096 is GPU-only
    assert entry["flashinfer_bench"] == [] and result["gpuarena_mode"] == "test"
    assert (
        "| rms_norm_bf16_h4096 | rms_norm_bf16_h4096_triton (triton) | – |"
        in (tmp_path / "peer-flashinfer.md").read_text()
    )
