"""What one mark of the device audit's PM sampler costs, by the size of its counter data image.

The audit reads each sampled request as the difference of two marks, and a mark is one
decoding pass of the sampler (pm_sampler.cpp), which re-initialises the whole counter data
image (IMAGE_SAMPLES samples). All nine softmax workloads with the audit spent 2.4 s waiting on
marks on an H100 (bench/research/results/run-stacks-9-workloads-ncu-NVIDIA-H100.json). For each
image size this times SEGMENTS segments of a fixed spin kernel: each mark's wait, and what the
segments read (the figure must not depend on the image size).

    python3 bench/research/audit_mark_cost.py [--out result.json]
"""

from __future__ import annotations

import statistics
import time

import torch
from probe_result import emit, out_path

from gpuarena.harness.device import device_audit

SEGMENTS = 100
SPIN_CYCLES = 200_000


def one_size(binary, image_samples: int) -> dict[str, float]:
    device_audit.IMAGE_SAMPLES = image_samples
    sampler = device_audit.DeviceSampler(binary, 0)
    marks_ms, busy_us, segments_ms = [], [], []
    original = sampler.mark

    def timed_mark():
        t0 = time.perf_counter()
        window = original()
        marks_ms.append((time.perf_counter() - t0) * 1e3)
        return window

    sampler.mark = timed_mark

    def work() -> None:
        torch.cuda._sleep(SPIN_CYCLES)
        torch.cuda.synchronize()

    with sampler.sampling():
        for _ in range(SEGMENTS):
            t0 = time.perf_counter()
            _, window = sampler.segment(work)
            segments_ms.append((time.perf_counter() - t0) * 1e3)
            busy_us.append(window.busy_ns / 1e3)
    sampler.close()
    return {
        "image_samples": image_samples,
        "mark_ms_median": round(statistics.median(marks_ms), 3),
        "mark_ms_p90": round(sorted(marks_ms)[int(0.9 * len(marks_ms))], 3),
        "segment_ms_median": round(statistics.median(segments_ms), 3),
        "busy_us_median": round(statistics.median(busy_us), 2),
        "busy_us_spread": round(statistics.pstdev(busy_us), 2),
    }


def main() -> None:
    out = out_path(__doc__)
    binary, why = device_audit.build_sampler()
    if binary is None:
        raise SystemExit(f"no sampler: {why}")
    torch.cuda._sleep(SPIN_CYCLES)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.cuda._sleep(SPIN_CYCLES)
    torch.cuda.synchronize()
    result = {
        "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%d"),
        "spin_kernel_wall_us": round((time.perf_counter() - t0) * 1e6, 1),
        "segments": SEGMENTS,
        "settle_s": device_audit.SETTLE_S,
        "sizes": [one_size(binary, n) for n in (1000, 250, 100, 1000)],
    }
    emit(result, out)


if __name__ == "__main__":
    main()
