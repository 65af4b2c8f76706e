#!/usr/bin/env python3
"""What the device audit costs a run on CUDA: the PM sampler's start, sampling on and off, one
idle segment (two marks), its close, and
whole `gpuarena run`s of the softmax examples with the audit on and off (their timed
medians and audit figures per workload). Why: with the audit on, red-team cases took
about 20 s on an H100 where they took 10 s before, and a runner pays that on every job.

    python3 bench/research/audit_cost.py [--windows 20] [--runs 1] [--examples pytorch,triton,cuda] [--out audit-cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def sampler_costs(windows: int) -> dict:
    from gpuarena.harness.device import device_audit

    t0 = time.perf_counter()
    binary, why = device_audit.build_sampler()
    built = time.perf_counter() - t0
    if binary is None:
        return {"error": why}
    t0 = time.perf_counter()
    sampler = device_audit.DeviceSampler(binary, 0)
    started = time.perf_counter() - t0
    try:
        return {"build_s": built, "start_s": started, **_windows(sampler, windows)}
    finally:
        t0 = time.perf_counter()
        sampler.close()
        print(f"close: {time.perf_counter() - t0:.3f} s")


def _windows(sampler, windows: int) -> dict:
    on_off = []
    for _ in range(3):
        t0 = time.perf_counter()
        with sampler.sampling():
            pass
        on_off.append(time.perf_counter() - t0)
    idle_s = []
    with sampler.sampling():
        for _ in range(windows):
            t0 = time.perf_counter()
            sampler.idle()
            idle_s.append(time.perf_counter() - t0)
    return {
        "sampling_on_off_s": on_off,
        "idle_segment_s_median": statistics.median(idle_s),
        "idle_segment_s_max": max(idle_s),
        "windows": windows,
    }


def run_costs(runs: int, examples: list[str], modes: list[str]) -> dict:
    """Whole runs of the softmax examples with the audit off and on: wall time, verdicts, each
    workload's timed medians (does sampling the timed rounds move them?) and audit figures."""
    out: dict = {}
    for example in examples:
        source = "examples/softmax/cuda" if example == "cuda" else f"examples/softmax/{example}.py"
        cmd = [sys.executable, "-m", "gpuarena.cli", "run", "level1/softmax", source, "--device", "cuda", "--json"]
        for audit in modes:
            walls, records = [], []
            for _ in range(runs):
                t0 = time.perf_counter()
                p = subprocess.run(
                    cmd, capture_output=True, text=True, cwd=REPO, env=dict(os.environ, GPUARENA_DEVICE_AUDIT=audit)
                )
                walls.append(time.perf_counter() - t0)
                try:
                    record = json.loads(p.stdout)
                except json.JSONDecodeError:
                    records.append({"error": f"exit {p.returncode}: {p.stderr[-600:]}"})
                    continue
                records.append(
                    {
                        "status": record.get("status"),
                        "reason": record.get("reason"),
                        "workloads": [
                            {
                                "name": w.get("name"),
                                "status": w.get("status"),
                                "median_us": (w.get("time") or {}).get("median_us"),
                                "reference_median_us": (w.get("reference_time") or {}).get("median_us"),
                                "device_audit": w.get("device_audit"),
                            }
                            for w in record.get("workloads", [])
                        ],
                    }
                )
            out[f"{example}_audit_{audit}"] = {"command": " ".join(cmd[1:]), "wall_s": walls, "runs": records}
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=20)
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--examples", default="pytorch,triton,cuda")
    p.add_argument("--audit", default="0,1", help="runs with the audit off (0) and on (1)")
    p.add_argument("--out", default="audit-cost.json")
    args = p.parse_args()
    result: dict = {}
    try:
        result["sampler"] = sampler_costs(args.windows)
    except Exception:  # the sampler's own words; the figures that follow still matter
        import traceback

        result["sampler"] = {"error": traceback.format_exc()[-1500:]}
    result["run"] = run_costs(args.runs, args.examples.split(","), args.audit.split(","))
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["sampler"]))
    print_runs(result["run"])
    return 0


def print_runs(runs: dict) -> None:
    """A line per workload: the timed medians and what the audit saw (µs per call)."""

    def f(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    for name, entry in runs.items():
        print(name, "wall s:", [round(x, 1) for x in entry["wall_s"]])
        for run in entry["runs"]:
            if "error" in run:
                print("  ", run["error"][-500:])
                continue
            print("  ", run["status"], (run.get("reason") or "")[:300])
            for w in run["workloads"]:
                a = w.get("device_audit") or {}
                print(
                    f"    {w['name']:<26} {w['status']:<9} claimed {f(w['median_us'])} ref {f(w['reference_median_us'])}"
                    f" | observed {f(a.get('observed_us_per_call'))} noise {f(a.get('noise_us'))}"
                    f" harness {f(a.get('harness_us_per_call'))} inflation {f(a.get('inflation_us'))}"
                    f" ref timed {f(a.get('reference_timed_us_per_call'))} twin {f(a.get('reference_twin_us_per_call'))}"
                    f" calls {a.get('calls')}"
                )


if __name__ == "__main__":
    sys.exit(main())
