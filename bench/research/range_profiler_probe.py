"""Questions about CUPTI's Range Profiler that decide how the ncu-Duration phase opens it.

1. Where a fresh profiler's first window spends its seconds (start, stop, decode).
2. Whether two processes can hold a range profiler open on one GPU at once.
3. Whether an open but idle profiler serialises kernels of two streams (torch.cuda._sleep).
4. Whether CUPTI activity records (torch.profiler) still see kernels while it is open.
5. What the harness Timer's set-up costs (CUDA context, instruction-cache sweep).

    python3 bench/research/range_profiler_probe.py [--json out.json]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time

import torch

from gpuarena.harness.device import icache_sweep, range_timer


def _ms(t0: float) -> float:
    return round((time.perf_counter() - t0) * 1e3, 2)


def first_window(library) -> dict[str, float]:
    profiler = range_timer.KernelDurations(0, library=library)
    lib, out = profiler.lib, {}
    values = (ctypes.c_double * 64)()
    count = ctypes.c_int(0)
    for k in (1, 2):
        for step, fn in (
            ("start", lambda: lib.grt_start()),
            ("stop", lambda: lib.grt_stop()),
            ("read", lambda: lib.grt_read(values, 64, ctypes.byref(count))),
        ):
            t0 = time.perf_counter()
            rc = fn()
            out[f"window {k} {step}"] = _ms(t0)
            if rc:
                out[f"window {k} {step} error"] = lib.grt_error().decode()
    profiler.close()
    return out


def two_streams_ms(cycles: int = 2_000_000) -> float:
    """Wall time of one spin kernel on each of two streams: one kernel's time if they overlap."""
    a, b = torch.cuda.Stream(), torch.cuda.Stream()
    best = float("inf")
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.stream(a):
            torch.cuda._sleep(cycles)
        with torch.cuda.stream(b):
            torch.cuda._sleep(cycles)
        torch.cuda.synchronize()
        best = min(best, _ms(t0))
    return best


def activity_kernels() -> int:
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(256, 256, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.softmax(x, -1)
        torch.cuda.synchronize()
    return sum(1 for e in prof.profiler.kineto_results.events() if e.device_type() != torch.autograd.DeviceType.CPU)


HOLDER = """
import sys, time
from gpuarena.harness.device import range_timer
p = range_timer.KernelDurations(0, library=sys.argv[1])
p.measure(lambda: None)
print("holding", flush=True)
time.sleep(float(sys.argv[2]))
p.close()
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    out: dict[str, object] = {}
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    out["cuda context ms"] = _ms(t0)
    t0 = time.perf_counter()
    icache_sweep.build(torch.device("cuda", 0))
    out["icache sweep build ms"] = _ms(t0)
    library, why = range_timer.build_range_timer()
    assert library is not None, why
    out["first window"] = first_window(library)
    print(out, flush=True)

    closed = two_streams_ms()
    with range_timer.KernelDurations(0, library=library) as profiler:
        profiler.measure(lambda: None)
        idle = two_streams_ms()
        inside: list[float] = []
        profiler.measure(lambda: inside.append(two_streams_ms()))
        kernels_seen = activity_kernels()
    out["two spin kernels on two streams, ms"] = {
        "profiler closed": closed,
        "open, idle": idle,
        "inside a window": inside[0],
    }
    out["activity kernels seen while open"] = kernels_seen
    out["activity kernels seen while closed"] = activity_kernels()
    print(out, flush=True)

    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(library), "15"], stdout=subprocess.PIPE, text=True)
    line = holder.stdout.readline().strip()
    t0 = time.perf_counter()
    try:
        with range_timer.KernelDurations(0, library=library) as profiler:
            n = len(profiler.measure(lambda: torch.softmax(torch.randn(64, 64, device="cuda"), -1)))
        out["second process while another holds one"] = f"{line}; opened, {n} kernels, {_ms(t0)} ms"
    except range_timer.RangeTimerError as exc:
        out["second process while another holds one"] = f"{line}; refused: {exc}"
    holder.wait()
    print(json.dumps(out, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
