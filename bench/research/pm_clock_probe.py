"""Which clock the PM sampler's sample timestamps are in, how far it is from the host's, and how
closely a window read by timestamps matches one read by marks (a mark is a decoding pass of the
sampler's, about 1.5 ms on an H200; a window by timestamps needs none).

Bursts of matmuls run between host clock readings; the offset that best puts the samples' busy
time inside the bursts' host windows is found by a scan, first over all bursts and then over the
first and last few (the drift between them), and windows read with that offset are set beside
the marks' figures. Run on an NVIDIA GPU: `python bench/research/pm_clock_probe.py --out probe.json`.
"""

from __future__ import annotations

import argparse
import bisect
import json
import statistics
import time
from pathlib import Path

import torch

from gpuarena.harness.device import device_audit


def captured(samples: list[list[float]], spans: list[tuple[int, int]], offset: int) -> float:
    """Busy ns of `samples` (sorted) inside the host `spans` moved by `offset`, each straddling
    sample by its share."""
    starts = [s[0] for s in samples]
    total = 0.0
    for start, end in spans:
        lo, hi = start + offset, end + offset
        for s0, s1, busy, _ in samples[max(bisect.bisect_left(starts, lo) - 2, 0) : bisect.bisect_right(starts, hi)]:
            if s1 <= lo or s0 >= hi or s1 <= s0:
                continue
            total += busy * (min(s1, hi) - max(s0, lo)) / (s1 - s0)
    return total


def best_offset(samples: list[list[float]], spans: list[tuple[int, int]], around: int, reach: int, step: int) -> int:
    return max(range(around - reach, around + reach + 1, step), key=lambda o: captured(samples, spans, o))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--bursts", type=int, default=24)
    args = parser.parse_args()
    binary, why = device_audit.build_sampler()
    if binary is None:
        raise SystemExit(why)
    sampler = device_audit.DeviceSampler(binary, 0)
    a = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        a @ a
    torch.cuda.synchronize()

    def burst() -> tuple[int, int]:
        before = time.clock_gettime_ns(time.CLOCK_REALTIME)
        a @ a
        torch.cuda.synchronize()
        return before, time.clock_gettime_ns(time.CLOCK_REALTIME)

    result: dict = {"device": torch.cuda.get_device_name()}
    sampler.start()
    time.sleep(0.01)
    spans, marked = [], []
    clock_s, mark_s = [], []
    for index in range(args.bursts):
        time.sleep(0.004 if index < args.bursts - 4 else 0.25)  # the last few later: drift
        t = time.perf_counter()
        sampler.clocks()
        clock_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        before = sampler.mark()
        mark_s.append(time.perf_counter() - t)
        spans.append(burst())
        time.sleep(device_audit.SETTLE_S)
        marked.append((sampler.mark() - before).busy_ns)
    time.sleep(0.005)
    samples = sorted(sampler.newest_samples(1 << 20))
    result["samples"] = samples
    result["spans"] = spans
    result["marked_busy_ns"] = marked
    result["sample_ns"] = statistics.median(s[1] - s[0] for s in samples)
    coarse = best_offset(samples, spans, 0, 100_000_000, 100_000)
    fine = best_offset(samples, spans, coarse, 200_000, 2_000)
    early = best_offset(samples, spans[:8], fine, 200_000, 2_000)
    late = best_offset(samples, spans[-4:], fine, 200_000, 2_000)
    result["offset_ns"] = {
        "all": fine,
        "first_8": early,
        "last_4": late,
        "seconds_apart": (spans[-1][0] - spans[0][0]) / 1e9,
    }
    result["captured_share"] = captured(samples, spans, fine) / sum(marked)
    # windows read right after their burst with the offset found, beside marks around the same burst
    fresh, window_s = [], []
    for _ in range(12):
        time.sleep(0.003)
        before_mark = sampler.mark()
        start, end = burst()
        t = time.perf_counter()
        window = sampler.window(start + fine, end + fine)
        window_s.append(time.perf_counter() - t)
        time.sleep(device_audit.SETTLE_S)
        fresh.append(
            {
                "window_busy_ns": window.busy_ns,
                "window_span_ns": window.span_ns,
                "host_span_ns": end - start,
                "marked_busy_ns": (sampler.mark() - before_mark).busy_ns,
            }
        )
    result["fresh"] = fresh
    result["costs_median_s"] = {
        "clock": statistics.median(clock_s),
        "mark": statistics.median(mark_s),
        "window": statistics.median(window_s),
    }
    sampler.stop()
    sampler.close()
    args.out.write_text(json.dumps(result))
    print(json.dumps({k: v for k, v in result.items() if k not in ("samples", "spans")}, indent=1))


if __name__ == "__main__":
    main()
