"""Can the supervisor see a worker's GPU time from outside? A probe of NVML's GPU performance
monitoring (GPM, Hopper and later) for issue 6's open case (a solution that rewrites the
worker's reply understates its device time, and nothing outside the worker bounds it).

A child process (standing in for the worker) runs blocks of calls of a known op, each call
followed by a device sync and a short host pause (the harness's own work between calls),
and reports the blocks' device time as CUPTI measures it (torch.profiler). Around each block
this process (standing in for the supervisor, which never touches the child's CUDA context)
takes a GPM sample before and after and reads GRAPHICS_UTIL (% of the interval any context
was busy) and SM_UTIL; busy time = utilisation x the interval. If GPM's busy time tracks
CUPTI's within a few percent for blocks of tens of ms, the supervisor can bound a worker's
claimed device time from below with it (once the worker does no GPU work of its own
between calls: the L2 sweep and output poisoning would move to the supervisor).

    python3 bench/research/gpm_probe.py --out gpm-probe.json      # on an NVIDIA GPU, Hopper or later

Prints one JSON line per block: op, calls, pause, interval_ms, cupti_busy_ms, gpm_busy_ms
(GRAPHICS_UTIL), sm_busy_ms (SM_UTIL) and gpm/cupti.

Result on an H100 (2026-11-23, bench/research/results/gpm-probe-NVIDIA-H100.json): not usable; GPM's
busy time ranged from 0 to 14 x CUPTI's, and read 0 for 17 ms of matrix products. CUPTI PM
sampling does see another process's work (bench/research/pm_sampling_cross.py).
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

BLOCKS = [  # (op, calls, host pause between calls in µs)
    ("add-16M", 200, 50),
    ("add-16M", 1000, 50),
    ("matmul-4096", 100, 50),
    ("matmul-4096", 20, 50),
    ("add-64K", 2000, 20),
    ("add-64K", 2000, 200),
    ("idle", 1, 20000),
]


def child() -> None:
    """The stand-in worker: for each line 'op calls pause_us' on stdin, run the block between
    a 'ready' and a 'done' line and report its CUPTI device time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    def make(op: str):
        rn = lambda *s: torch.randn(*s, device="cuda", dtype=torch.bfloat16)  # noqa: E731
        if op == "add-16M":
            a, b = rn(1 << 24), rn(1 << 24)
            return lambda: a + b
        if op == "add-64K":
            a, b = rn(1 << 16), rn(1 << 16)
            return lambda: a + b
        if op == "matmul-4096":
            a, b = rn(4096, 4096), rn(4096, 4096)
            return lambda: a @ b
        if op == "softmax-64x1000":  # the red-team cases' small workload, float32
            x = torch.randn(64, 1000, device="cuda")
            return lambda: torch.softmax(x, dim=-1)
        if op == "tiny-x10":  # ten 1-element adds per call: many launches, little work
            a = rn(1)
            return lambda: [a + a for _ in range(10)]
        return lambda: None

    for line in sys.stdin:
        op, calls, pause_us = line.split()
        fn, n, pause = make(op), int(calls), int(pause_us) / 1e6
        fn()
        torch.cuda.synchronize()
        print("ready", flush=True)
        sys.stdin.readline()  # go
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                fn()
                torch.cuda.synchronize()
                end = time.perf_counter() + pause
                while time.perf_counter() < end:
                    pass
        spans = sorted(
            (e.start_ns(), e.start_ns() + e.duration_ns())
            for e in prof.profiler.kineto_results.events()
            if e.device_type() != torch.autograd.DeviceType.CPU and e.duration_ns() > 0
        )
        busy, last_end = 0, None
        for start, end_ns in spans:  # the union of the intervals
            if last_end is None or start > last_end:
                busy += end_ns - start
                last_end = end_ns
            elif end_ns > last_end:
                busy += end_ns - last_end
                last_end = end_ns
        print(json.dumps({"cupti_busy_ms": busy / 1e6, "kernels": len(spans)}), flush=True)


def observe(gpu_index: int, repeats: int) -> list[dict]:
    import pynvml as nv

    nv.nvmlInit()
    handle = nv.nvmlDeviceGetHandleByIndex(gpu_index)
    support = nv.nvmlGpmQueryDeviceSupport(handle)
    if not support.isSupportedDevice:
        raise SystemExit("GPM is not supported on this device")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu_index), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdin and proc.stdout
    before, after = nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()
    rows = []
    try:
        for _ in range(repeats):
            for op, calls, pause_us in BLOCKS:
                proc.stdin.write(f"{op} {calls} {pause_us}\n")
                proc.stdin.flush()
                assert proc.stdout.readline().strip() == "ready"
                nv.nvmlGpmSampleGet(handle, before)
                t0 = time.perf_counter_ns()
                proc.stdin.write("go\n")
                proc.stdin.flush()
                report = json.loads(proc.stdout.readline())
                nv.nvmlGpmSampleGet(handle, after)
                interval_ms = (time.perf_counter_ns() - t0) / 1e6
                get = nv.c_nvmlGpmMetricsGet_t()
                get.version, get.numMetrics = nv.NVML_GPM_METRICS_GET_VERSION, 2
                get.sample1, get.sample2 = before, after
                get.metrics[0].metricId = nv.NVML_GPM_METRIC_GRAPHICS_UTIL
                get.metrics[1].metricId = nv.NVML_GPM_METRIC_SM_UTIL
                nv.nvmlGpmMetricsGet(get)
                gpm = get.metrics[0].value / 100 * interval_ms
                row = {
                    "op": op,
                    "calls": calls,
                    "pause_us": pause_us,
                    "interval_ms": round(interval_ms, 3),
                    "cupti_busy_ms": round(report["cupti_busy_ms"], 4),
                    "gpm_busy_ms": round(gpm, 4),
                    "sm_busy_ms": round(get.metrics[1].value / 100 * interval_ms, 4),
                    "gpm_over_cupti": round(gpm / report["cupti_busy_ms"], 4) if report["cupti_busy_ms"] else None,
                }
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
        nv.nvmlGpmSampleFree(before)
        nv.nvmlGpmSampleFree(after)
        nv.nvmlShutdown()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--gpu", type=int, default=0, help="NVML index of the GPU")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.child:
        child()
        return 0
    rows = observe(args.gpu, args.repeats)
    ratios: dict[str, list[float]] = {}
    for r in rows:
        if r["gpm_over_cupti"] is not None:
            ratios.setdefault(f"{r['op']} x{r['calls']} pause {r['pause_us']}us", []).append(r["gpm_over_cupti"])
    summary = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in ratios.items()}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
