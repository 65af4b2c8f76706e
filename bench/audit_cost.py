#!/usr/bin/env python3
"""What the device audit costs a run on CUDA: the PM sampler's start, sampling on and off, one
idle segment (two marks), its close, and
a whole `gpuarena run` with the audit on and off. Why: with the audit on, red-team cases took
about 20 s on an H100 where they took 10 s before, and a runner pays that on every job.

    python3 bench/audit_cost.py [--windows 20] [--runs 2] [--out audit-cost.json]
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

REPO = Path(__file__).resolve().parents[1]


def sampler_costs(windows: int) -> dict:
    from gpuarena.harness import device_audit

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
    return {"sampling_on_off_s": on_off, "idle_segment_s_median": statistics.median(idle_s),
            "idle_segment_s_max": max(idle_s), "windows": windows}


def run_costs(runs: int) -> dict:
    cmd = [sys.executable, "-m", "gpuarena.cli", "run", "level1/softmax", "examples/softmax/pytorch.py",
           "--device", "cuda", "--json"]
    out: dict = {"command": " ".join(cmd[1:])}
    for audit in ("0", "1"):
        walls, audits = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                               env=dict(os.environ, GPUARENA_DEVICE_AUDIT=audit))
            walls.append(time.perf_counter() - t0)
            try:
                record = json.loads(p.stdout)
                audits.append([w.get("device_audit") for w in record.get("workloads", [])][:1])
                status = record.get("status")
            except json.JSONDecodeError:
                status = f"exit {p.returncode}: {p.stderr[-300:]}"
        out[f"audit_{audit}"] = {"wall_s": walls, "status": status, "first_audit": audits[-1] if audits else None}
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--windows", type=int, default=20)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--out", default="audit-cost.json")
    args = p.parse_args()
    result: dict = {}
    try:
        result["sampler"] = sampler_costs(args.windows)
    except Exception:  # the sampler's own words; the figures that follow still matter
        import traceback
        result["sampler"] = {"error": traceback.format_exc()[-1500:]}
    result["run"] = run_costs(args.runs)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
