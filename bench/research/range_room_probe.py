"""What CUPTI's Range Profiler does with a window of more kernels than max_ranges (dropped? an
error? a second pass?): the count of figures and the library's answer for each room and count.

    python3 bench/research/range_room_probe.py [--out result.json]
"""

import ctypes

import torch
from probe_result import emit, out_path

from gpuarena.harness.device import range_timer

out = out_path(__doc__)
library, why = range_timer.build_range_timer()
if library is None:
    raise SystemExit(f"no range timer: {why}")
x = torch.zeros(1024, device="cuda")
rows = []
for room in (16, 128):
    profiler = range_timer.KernelDurations(0, max_ranges=room, library=library)
    for kernels in (room - 1, room, room + 1, 3 * room):
        lib = profiler.lib
        values = (ctypes.c_double * (8 * room))()
        count = ctypes.c_int(0)
        start = lib.grt_start()
        for _ in range(kernels):
            x.add_(1)
        torch.cuda.synchronize()
        stop = lib.grt_stop()
        read = lib.grt_read(values, 8 * room, ctypes.byref(count))
        rows.append(
            {
                "room": room,
                "kernels": kernels,
                "start": start,
                "stop": stop,
                "read": read,
                "count": count.value,
                "error": lib.grt_error().decode(),
                "first_ns": values[0],
                "sum_ns": sum(values[: count.value]),
            }
        )
    profiler.close()
emit(rows, out)
