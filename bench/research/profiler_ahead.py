"""Can the ncu phase's first-window cost (about 4 s on an H100) be paid beside other work?

The worker opens CUPTI's Range Profiler once a run for the solution's ncu figure, and the first
window after opening costs seconds (bench/research/results/range-profiler-NVIDIA-H100.md). This
asks what those seconds are and whether they can overlap with the run's other work:
1. the first window's cost with a small and a large counter image (each opening pays it again);
2. the same first window in a thread while the main thread launches small kernels: how long
   it takes, the thread's CPU time in it, and the main thread's kernel rate meanwhile;
3. a window of a real kernel from the main thread afterwards: its cost and figure;
4. once closed, whether the audit's PM sampler can take the counters.

    python3 bench/research/profiler_ahead.py [--out result.json]
"""

from __future__ import annotations

import threading
import time

import torch
from probe_result import emit, out_path

from gpuarena.harness.device import device_audit, range_timer


def kernel_rate(seconds: float, stop: threading.Event | None = None) -> dict[str, float]:
    """Small kernels launched and waited for in batches of 100: batches a second."""
    x = torch.zeros(1024, device="cuda")
    batches, t0 = 0, time.perf_counter()
    while (stop is None and time.perf_counter() - t0 < seconds) or (stop is not None and not stop.is_set()):
        for _ in range(100):
            x.add_(1)
        torch.cuda.synchronize()
        batches += 1
    elapsed = time.perf_counter() - t0
    return {"batches_per_s": round(batches / elapsed, 1), "seconds": round(elapsed, 3)}


def first_window(library, max_ranges: int) -> dict[str, float]:
    t0, c0 = time.perf_counter(), time.thread_time()
    profiler = range_timer.KernelDurations(0, max_ranges=max_ranges, library=library)
    opened, c1 = time.perf_counter(), time.thread_time()
    profiler.measure(lambda: None)
    done, c2 = time.perf_counter(), time.thread_time()
    out = {
        "max_ranges": max_ranges,
        "open_ms": round((opened - t0) * 1e3, 1),
        "open_cpu_ms": round((c1 - c0) * 1e3, 1),
        "first_window_ms": round((done - opened) * 1e3, 1),
        "first_window_cpu_ms": round((c2 - c1) * 1e3, 1),
    }
    second = time.perf_counter()
    profiler.measure(lambda: None)
    out["second_window_ms"] = round((time.perf_counter() - second) * 1e3, 2)
    out["profiler"] = profiler
    return out


def main() -> None:
    out = out_path(__doc__)
    library, why = range_timer.build_range_timer()
    if library is None:
        raise SystemExit(f"no range timer: {why}")
    torch.zeros(1, device="cuda")
    result: dict[str, object] = {"device": torch.cuda.get_device_name(0), "date": time.strftime("%Y-%m-%d")}
    result["kernel_rate_alone"] = kernel_rate(1.0)

    sizes = []
    for max_ranges in (64, 4096):
        row = first_window(library, max_ranges)
        row.pop("profiler").close()
        sizes.append(row)
    result["first_window_by_image"] = sizes

    # 2. in a thread, beside kernels on the main thread
    box: dict[str, object] = {}
    stop = threading.Event()

    def ahead() -> None:
        try:
            box.update(first_window(library, 4096))
        except Exception as exc:  # a probe: say what failed
            box["error"] = repr(exc)
        finally:
            stop.set()

    thread = threading.Thread(target=ahead)
    t0 = time.perf_counter()
    thread.start()
    result["kernel_rate_beside"] = kernel_rate(0, stop)
    thread.join()
    result["thread_total_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
    profiler = box.pop("profiler", None)
    result["first_window_in_thread"] = box

    # 3. a real window from the main thread, on the profiler the thread opened
    if profiler is not None:
        x = torch.zeros(1 << 20, device="cuda")
        t1 = time.perf_counter()
        try:
            durations = profiler.measure(lambda: x.add_(1))
            result["main_thread_window"] = {
                "ms": round((time.perf_counter() - t1) * 1e3, 2),
                "durations_ns": [round(d) for d in durations],
            }
        except Exception as exc:
            result["main_thread_window"] = {"error": repr(exc)}
        profiler.close()

    # 4. the PM sampler after it
    binary, why = device_audit.build_sampler()
    if binary is None:
        result["sampler_after"] = f"no sampler: {why}"
    else:
        try:
            sampler = device_audit.DeviceSampler(binary, 0)
            with sampler.sampling():
                window = sampler.idle(0.01)
            sampler.close()
            result["sampler_after"] = {"started": True, "samples": window.samples}
        except device_audit.SamplerError as exc:
            result["sampler_after"] = {"error": str(exc)}
    emit(result, out)


if __name__ == "__main__":
    main()
