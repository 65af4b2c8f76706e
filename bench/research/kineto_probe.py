"""Prints what torch.profiler's kineto events look like on this GPU (names, types, correlation).

Used to check the attribution in gpuarena.harness.device.cupti_timing.device_busy_ns on a new torch.
Run: python bench/research/kineto_probe.py
"""

import ctypes

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from gpuarena.harness.device.cupti_timing import device_busy_ns
from gpuarena.harness.device.timing import Timer

x = torch.randn(1 << 24, device="cuda", dtype=torch.bfloat16)
side = torch.cuda.Stream()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for _ in range(2):
        torch.cuda.synchronize()
        with record_function("gpuarena::timed_call"):
            y = x + x
            with torch.cuda.stream(side):
                z = x * 3
            torch.cuda.synchronize()
for e in prof.profiler.kineto_results.events():
    print(
        f"{str(e.device_type()):22s} ann={int(e.is_user_annotation())} corr={e.correlation_id():6d} start={e.start_ns()} dur={e.duration_ns():8d} {e.name()[:70]}"
    )
print("busy per call (ns):", device_busy_ns(prof.profiler.kineto_results.events(), 2))
t = Timer(torch.device("cuda"))
print("method:", t.method)
s = t.run_block(lambda i: x + x, 20)
print("device_ns:", s.device_ns)
print("e2e_ns:", s.e2e_ns)

# What a timing block costs in wall time, per method (the profiler's start/stop is per block).
import time as _time

for method in ("cupti-device-time", "cuda-sync-wallclock"):
    timer = Timer(torch.device("cuda"), method=method)
    timer.run_block(lambda i: x + x, 16)
    t0 = _time.perf_counter()
    for _ in range(5):
        timer.run_block(lambda i: x + x, 16)
    print(f"{method}: {(_time.perf_counter() - t0) / 5 * 1e3:.1f} ms per block of 16 calls")

timer = Timer(torch.device("cuda"))
for name, fn in (
    ("evict+sync", lambda: (timer.evict_caches(), torch.cuda.synchronize())),
    ("persisting reset", timer._reset_persisting_l2),
    ("sync", torch.cuda.synchronize),
    ("cuCtxResetPersistingL2Cache", lambda: timer._libcuda.cuCtxResetPersistingL2Cache()),
    ("cuCtxSetLimit(persisting, 0)", lambda: timer._libcuda.cuCtxSetLimit(0x06, ctypes.c_size_t(0))),
):
    fn()
    t0 = _time.perf_counter()
    for _ in range(20):
        fn()
    print(f"{name}: {(_time.perf_counter() - t0) / 20 * 1e3:.3f} ms")
