"""Prints what torch.profiler's kineto events look like on this GPU (names, types, correlation).

Used to check the attribution in gpuarena.harness.timing.device_busy_ns on a new torch.
Run: python bench/kineto_probe.py
"""

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from gpuarena.harness.timing import Timer, device_busy_ns

x = torch.randn(1 << 24, device="cuda", dtype=torch.bfloat16)
side = torch.cuda.Stream()
with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    for i in range(2):
        torch.cuda.synchronize()
        with record_function("gpuarena::timed_call"):
            y = x + x
            with torch.cuda.stream(side):
                z = x * 3
            torch.cuda.synchronize()
for e in prof.profiler.kineto_results.events():
    print(f"{str(e.device_type()):22s} corr={e.correlation_id():6d} start={e.start_ns()} dur={e.duration_ns():8d} {e.name()[:70]}")
print("busy per call (ns):", device_busy_ns(prof.profiler.kineto_results.events(), 2))
t = Timer(torch.device("cuda"))
print("method:", t.method)
s = t.run_block(lambda i: x + x, 20)
print("device_ns:", s.device_ns)
print("e2e_ns:", s.e2e_ns)
