"""What the ncu-Duration phase (harness/kernel_duration.py) costs on a CUDA device, step by step.

Times, in this process: building the range timer, opening and closing it (CUPTI's profiler
initialisation, host object, config image), profiled calls of a small and a large softmax
after the harness's eviction, and where the first window after opening spends its time.
Results: bench/research/results/range-profiler-NVIDIA-H100.md.

    python3 bench/research/kernel_duration_cost.py [--json out.json]
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import statistics
import sys
import time

import torch

from gpuarena.harness.device import range_timer
from gpuarena.harness.device.timing import Timer

SHAPES = {"softmax-64x1000": (64, 1000), "softmax-8192x8192": (8192, 8192)}


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 2)


def first_calls(library, device) -> dict[str, list[tuple[str, float]]]:
    """Where a fresh profiler's slow first call goes: an empty window, the first kernel, a
    second kernel, a re-opened profiler."""
    a = torch.randn(64, 1000, device=device)
    b = torch.randn(4096, 4096, device=device)
    steps = {
        "empty": lambda: None,
        "softmax": lambda: torch.softmax(a, -1),
        "softmax again": lambda: torch.softmax(a, -1),
        "other kernel": lambda: torch.mm(b, b),
        "other again": lambda: torch.mm(b, b),
    }
    out: dict[str, list[tuple[str, float]]] = {}
    for opening in ("first open", "re-open"):
        rows: list[tuple[str, float]] = []
        t0 = time.perf_counter()
        with range_timer.KernelDurations(0, library=library) as profiler:
            rows.append(("open", _ms(t0)))
            for name, fn in steps.items():
                t0 = time.perf_counter()
                n = len(profiler.measure(fn))
                rows.append((f"{name} ({n} kernels)", _ms(t0)))
        out[opening] = rows
        print(f"{opening}: " + ", ".join(f"{k} {v} ms" for k, v in rows), flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--opens", type=int, default=3)
    args = parser.parse_args()
    faulthandler.dump_traceback_later(60, repeat=True)  # where a hang sits, every minute
    device = torch.device("cuda", 0)
    torch.cuda.init()
    out: dict[str, object] = {"device": torch.cuda.get_device_name(0)}

    t0 = time.perf_counter()
    library, why = range_timer.build_range_timer()
    out["build_ms"] = _ms(t0)
    if library is None:
        print(f"no range timer: {why}")
        return 1
    t0 = time.perf_counter()
    timer = Timer(device, icache=True)
    out["timer_ms"] = _ms(t0)

    opens, closes = [], []
    for _ in range(args.opens):
        t0 = time.perf_counter()
        profiler = range_timer.KernelDurations(0, library=library)
        opens.append(_ms(t0))
        t0 = time.perf_counter()
        profiler.close()
        closes.append(_ms(t0))
    out["open_ms"], out["close_ms"] = opens, closes
    print(f"build {out['build_ms']} ms, Timer {out['timer_ms']} ms, open {opens} ms, close {closes} ms", flush=True)

    for name, (rows, cols) in SHAPES.items():
        x = torch.randn(rows, cols, device=device)
        y = torch.empty_like(x)
        call = lambda: torch.softmax(x, -1, out=y)  # noqa: E731
        call()
        torch.cuda.synchronize()
        walls, evicts, durations = [], [], []
        with range_timer.KernelDurations(0, library=library) as profiler:
            for _ in range(args.calls):
                t0 = time.perf_counter()
                timer._between()
                evicts.append(_ms(t0))
                t0 = time.perf_counter()
                durations.append(sum(profiler.measure(call)))
                walls.append(_ms(t0))
        row = {
            "evict_ms": evicts,
            "measure_ms": walls,
            "duration_ns": durations,
            "median_duration_us": statistics.median(durations) / 1e3,
        }
        out[name] = row
        print(
            f"{name}: measure {walls} ms, eviction {evicts} ms, duration median {row['median_duration_us']:.2f} µs",
            flush=True,
        )
    out["first_calls"] = first_calls(library, device)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
