"""Where small kernels lose a microsecond: CUPTI kernel durations against ncu's
gpu__time_duration, and the GPU's own per-kernel overhead between back-to-back kernels.

bench/fidelity.py found gpuarena's CUPTI device time about 1 µs under ncu for every op on an
H200, large or small (add 64K: 1.38 vs 2.43 µs; add 16M: 22.3 vs 23.3; layernorm: 102.2 vs
103.2), which reads like a fixed per-kernel cost that ncu counts and CUPTI's kernel record
does not. This script measures, for each op, on one CUDA device:

- cupti_us: the median CUPTI duration of the op's kernels (torch.profiler), one call at a
  time after an L2 read sweep (what the harness measures);
- period_us and gap_us: the same op replayed 100 times back to back in one CUDA graph (so the
  GPU, not the host, sets the pace): the median start-to-start period of its kernels and the
  median idle gap between one kernel's end and the next one's start;
- ncu_us: ncu's gpu__time_duration.sum for the op (--cache-control all --clock-control none),
  when ncu is on PATH.

If ncu_us ≈ cupti_us + gap_us for every op, the missing microsecond is the GPU's launch cost
per kernel, which gpuarena can measure itself (no ncu) and add per kernel.

    python3 bench/research/kernel_overhead.py --out bench/research/results/kernel-overhead-<device>.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
OPS = ["tiny-add-1", "add-64K", "matmul-512", "add-16M", "layernorm-16384x4096"]


def make(op: str):
    import torch
    import torch.nn.functional as F

    if op == "tiny-add-1":
        x = torch.ones(1, device="cuda")
        return lambda: x.add_(1)
    if op == "layernorm-16384x4096":
        x, w, b = (torch.randn(*s, device="cuda", dtype=torch.bfloat16) for s in ((16384, 4096), (4096,), (4096,)))
        return lambda: F.layer_norm(x, (4096,), w, b)
    from fidelity import make_call

    call = make_call(op, 1)
    return lambda: call(0)


def kernels(prof) -> list[tuple[int, int]]:
    """The op's kernels (start, end): not copies, not the L2 sweep's reduction."""
    import torch

    return sorted(
        (e.start_ns(), e.start_ns() + e.duration_ns())
        for e in prof.profiler.kineto_results.events()
        if e.device_type() != torch.autograd.DeviceType.CPU
        and e.duration_ns() > 0
        and not e.name().startswith(("Memcpy", "Memset"))
        and "reduce_kernel" not in e.name()
    )


def measure(op: str) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    fn = make(op)
    sweep = torch.ones(64 << 20, device="cuda")  # 256 MB, read to evict L2
    sink = torch.empty((), device="cuda")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(30):
            torch.sum(sweep, dim=0, out=sink)
            torch.cuda.synchronize()
            fn()
            torch.cuda.synchronize()
    single = [e - s for s, e in kernels(prof)]

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(100):
                fn()
    torch.cuda.synchronize()
    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        graph.replay()
        torch.cuda.synchronize()
    ks = kernels(prof)
    periods = [b[0] - a[0] for a, b in zip(ks, ks[1:])]
    gaps = [b[0] - a[1] for a, b in zip(ks, ks[1:])]
    per_call = len(ks) / 100
    return {
        "op": op,
        "cupti_us": statistics.median(single) / 1e3,
        "cupti_kernels": len(single),
        "graph_kernels_per_call": per_call,
        "period_us": statistics.median(periods) / 1e3,
        "gap_us": statistics.median(gaps) / 1e3,
        "graph_duration_us": statistics.median(b - a for a, b in ks) / 1e3,
    }


def ncu_child(op: str) -> None:
    import torch

    fn = make(op)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    for _ in range(5):
        torch.cuda.nvtx.range_push("measured")
        fn()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


def ncu(op: str) -> float | None:
    from fidelity import NCU_METRIC, parse_ncu_csv

    exe = shutil.which("ncu")
    if not exe:
        return None
    cmd = [
        exe,
        "--metrics",
        NCU_METRIC,
        "--csv",
        "--cache-control",
        "all",
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        "measured/",
        sys.executable,
        __file__,
        "--ncu-child",
        op,
    ]
    env = dict(os.environ, LC_ALL="C")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env)
    rows = parse_ncu_csv(p.stdout)
    if not rows:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
        return None
    per_call = max(1, len(rows) // 5)
    sums = [sum(r.ns for r in rows[i * per_call : (i + 1) * per_call]) for i in range(len(rows) // per_call)]
    return statistics.median(sums) / 1e3


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--ncu-child", default=None)
    args = p.parse_args()
    if args.ncu_child:
        ncu_child(args.ncu_child)
        return 0
    import torch

    rows = []
    for op in args.ops.split(","):
        row = measure(op)
        row["ncu_us"] = ncu(op)
        if row["ncu_us"]:
            row["ncu_minus_cupti_us"] = row["ncu_us"] - row["cupti_us"]
        print(json.dumps(row), flush=True)
        rows.append(row)
    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
