"""Whether the PM sampler's samples tile the GPU's time: gaps between them, samples out of order,
zero or backwards timestamps, and whether the sampler's `windows` figure covers what a full scan
of its samples covers (an honest GPU MODE vectoradd was REJECTED on an H200 on 2026-12-03, because one
window of the reference's timed block read "the samples cover 834 µs of 6911").

Runs on an NVIDIA GPU a few seconds of mixed work (idle stretches, small kernels, large matmuls,
host sleeps of every length) with sampling on, then lists every sample as the sampler kept it
(newest first, not sorted), and reads windows of several lengths through the sampler beside a scan
of that list in Python:

    python3 bench/research/pm_sample_gaps.py --out gaps.json
"""

from __future__ import annotations

import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from probe_result import emit, out_path

from gpuarena.harness.device import device_audit


def covered(samples: list[list[float]], t0: float, t1: float) -> float:
    """ns of [t0, t1] that some sample covers, by a scan of every sample (order not assumed)."""
    total = 0.0
    for start, end, _busy, _read in samples:
        if end <= start or end <= t0 or start >= t1:
            continue
        total += min(end, t1) - max(start, t0)
    return total


def work(seconds: float) -> None:
    """Mixed GPU work for about `seconds`: what a verdict does between its audit's reads."""
    a = torch.randn(4096, 4096, device="cuda")
    small = torch.randn(1 << 14, device="cuda")
    rng = random.Random(0)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kind = rng.choice(["idle", "small", "matmul", "sleep-long"])
        if kind == "idle":
            time.sleep(rng.uniform(0.0005, 0.02))
        elif kind == "small":
            for _ in range(rng.randint(1, 200)):
                small.add_(1.0)
            torch.cuda.synchronize()
        elif kind == "matmul":
            for _ in range(rng.randint(1, 5)):
                a @ a
            torch.cuda.synchronize()
        else:
            time.sleep(rng.uniform(0.05, 0.3))


DISTURBANCES = {
    "none": None,
    "cuInit in another process": [
        sys.executable,
        "-c",
        "import ctypes; lib = ctypes.CDLL('libcuda.so.1'); assert lib.cuInit(0) == 0",
    ],
    "nvidia-smi": ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,temperature.gpu", "--format=csv"],
    "a CUDA context made and ended in another process": [
        sys.executable,
        "-c",
        "import ctypes; lib = ctypes.CDLL('libcuda.so.1'); assert lib.cuInit(0) == 0; "
        "dev = ctypes.c_int(); ctx = ctypes.c_void_p(); assert lib.cuDeviceGet(ctypes.byref(dev), 0) == 0; "
        "assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0; "
        "assert lib.cuCtxSetCurrent(ctx) == 0; assert lib.cuCtxSynchronize() == 0",
    ],
}
"""What runs beside the sampled work, every 0.3 s: another process of ours touching the driver."""


def main() -> None:
    out = out_path(__doc__ or "")
    binary, why = device_audit.build_sampler()
    if binary is None:
        raise SystemExit(why)
    sampler = device_audit.DeviceSampler(binary, 0)
    result: dict = {"device": torch.cuda.get_device_name(), "command": " ".join(sys.argv)}
    passes = []
    for disturbance, command in DISTURBANCES.items():
        seconds = 3.0
        sampler.start()
        stop = threading.Event()
        started = [0]

        def disturb(command: list[str] | None = command) -> None:
            while command is not None and not stop.wait(0.3):
                subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
                started[0] += 1

        beside = threading.Thread(target=disturb, daemon=True)
        beside.start()
        work(seconds)
        stop.set()
        beside.join()
        time.sleep(0.01)
        listed = sampler.newest_samples(1 << 20)  # newest first, as kept
        ordered = list(reversed(listed))
        widths = [s[1] - s[0] for s in ordered]
        gaps = [ordered[i + 1][0] - ordered[i][1] for i in range(len(ordered) - 1)]
        backwards = [i for i in range(len(ordered) - 1) if ordered[i + 1][1] < ordered[i][1]]
        width = statistics.median(widths)
        first, last = min(s[0] for s in ordered), max(s[1] for s in ordered)
        rng = random.Random(1)
        asked = []
        for length_ns in (500_000, 2_000_000, 7_000_000, 20_000_000):
            for _ in range(40):
                t0 = int(rng.uniform(first, last - length_ns))
                asked.append((t0, t0 + length_ns))
        # the sampler's raw figures ([busy, covered, samples, read] each), before the harness
        # scales a window up or refuses it (device_audit.SPAN_COVERED)
        raw = sampler._send("windows " + " ".join(f"{t0} {t1}" for t0, t1 in asked))["windows"]
        windows, mismatched = [], 0
        for (t0, t1), (_busy, by_sampler, _n, _read) in zip(asked, raw, strict=True):
            scanned = covered(ordered, t0, t1)
            windows.append({"length_ns": t1 - t0, "scanned": scanned, "sampler_span": by_sampler})
            if abs(scanned - by_sampler) > 0.01 * (t1 - t0):
                mismatched += 1
        sampler.stop()
        passes.append(
            {
                "beside": disturbance,
                "processes_beside": started[0],
                "seconds": seconds,
                "samples": len(ordered),
                "width_ns": {"median": width, "min": min(widths), "max": max(widths)},
                "zero_or_backwards_widths": sum(1 for w in widths if w <= 0),
                "zero_timestamps": sum(1 for s in ordered if s[0] == 0 or s[1] == 0),
                "out_of_order": len(backwards),
                "out_of_order_at": backwards[:20],
                "gaps_over_1.5_widths": sum(1 for g in gaps if g > 1.5 * width),
                "largest_gaps_ns": sorted(gaps, reverse=True)[:10],
                "overlaps_ns": sorted(g for g in gaps if g < 0)[:10],
                "windows_read": len(windows),
                "windows_where_sampler_and_scan_differ_over_1pct": mismatched,
                "least_scanned_share": min(w["scanned"] / w["length_ns"] for w in windows),
                "least_sampler_share": min(w["sampler_span"] / w["length_ns"] for w in windows),
                "around_first_backwards": [ordered[i] for i in range(max(backwards[0] - 3, 0), backwards[0] + 4)]
                if backwards
                else [],
            }
        )
    sampler.close()
    result["passes"] = passes
    emit(result, out)


if __name__ == "__main__":
    main()
