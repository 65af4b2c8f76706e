"""FlashInfer-Bench's side of bench/peer_flashinfer.py: one verdict in its `--fib-child` process,
what its CLI's `flashinfer-bench run --local DIR` does for one definition and its solution (with
the CLI's defaults), and its own loader (TraceSet.from_path) on the bench's trace-set."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import time
from pathlib import Path
from typing import Any

# flashinfer-bench's CLI defaults (`flashinfer-bench run`), which its BenchmarkConfig shares
FIB_SETTINGS: dict[str, Any] = {
    "warmup_runs": 10,
    "iterations": 50,
    "num_trials": 3,
    "rtol": 1e-2,
    "atol": 1e-2,
    "use_isolated_runner": False,
    "timeout_seconds": 300,
}


def fib_version() -> str | None:
    try:
        return importlib.metadata.version("flashinfer-bench")
    except importlib.metadata.PackageNotFoundError:
        return None


def fib_child(args: argparse.Namespace) -> dict[str, Any]:
    """One FlashInfer-Bench verdict, as its CLI's `run --local DIR --definitions D --solutions S` runs it."""
    started = time.perf_counter()
    out: dict[str, Any] = {"version": fib_version(), "traces": []}
    from flashinfer_bench.bench import Benchmark, BenchmarkConfig
    from flashinfer_bench.data import TraceSet

    out["import_s"] = round(time.perf_counter() - started, 3)
    # its CLI's logging (cli_config_logging): the package's INFO lines, here on stderr
    package_log = logging.getLogger("flashinfer_bench")
    package_log.setLevel(logging.INFO)
    package_log.addHandler(logging.StreamHandler())
    t0 = time.perf_counter()
    benchmark, ran = None, None
    try:
        trace_set = TraceSet.from_path(str(args.trace_set))
        out["workloads"] = [t.workload.uuid for t in trace_set.workloads.get(args.definition, [])]
        config = BenchmarkConfig(**FIB_SETTINGS, definitions=[args.definition], solutions=[args.solution_name])
        benchmark = Benchmark(trace_set, config)  # its runner starts here (no CUDA device: it raises)
        ran = benchmark.run_all(True)
    except Exception as exc:  # the CLI logs and re-raises: here it is the verdict's error
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if benchmark is not None:
            benchmark.close()
    out["run_s"] = round(time.perf_counter() - t0, 3)
    for trace in ran.traces.get(args.definition, []) if ran is not None else []:
        ev = trace.evaluation
        perf, corr = ev.performance, ev.correctness
        out["traces"].append(
            {
                "workload": trace.workload.uuid,
                "solution": trace.solution,
                "status": ev.status.value,
                "latency_us": perf.latency_ms * 1e3 if perf else None,
                "reference_latency_us": perf.reference_latency_ms * 1e3 if perf else None,
                "speedup": perf.speedup_factor if perf else None,
                "max_absolute_error": corr.max_absolute_error if corr else None,
                "max_relative_error": corr.max_relative_error if corr else None,
                "hardware": ev.environment.hardware,
                "log": (ev.log or "")[-1500:] if ev.status.value != "PASSED" else "",
            }
        )
    return out


def validate_with_flashinfer_bench(trace_set: Path) -> dict[str, Any]:
    """FlashInfer-Bench's own loader on the folder (its pydantic models): what it read, or why not."""
    try:
        from flashinfer_bench.data import TraceSet
    except Exception as exc:  # not installed, or its imports missing
        return {"error": f"flashinfer_bench not importable: {type(exc).__name__}: {exc}"}
    try:
        loaded = TraceSet.from_path(str(trace_set))
    except Exception as exc:
        return {"error": f"TraceSet.from_path refused it: {type(exc).__name__}: {exc}"}
    return {
        "version": fib_version(),
        "definitions": sorted(loaded.definitions),
        "solutions": {k: [s.name for s in v] for k, v in loaded.solutions.items()},
        "workloads": {k: len(v) for k, v in loaded.workloads.items()},
    }
