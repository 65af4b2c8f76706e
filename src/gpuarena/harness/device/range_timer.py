"""Each kernel's duration as Nsight Compute reports it, read in-process without running ncu.

ncu's "Duration" is the hardware counter gpu__time_duration.sum. CUPTI's Range Profiler reads
the same counter, one range per kernel launch (`range_timer.cpp`, built here once per CUDA
install and source hash into a shared library loaded with ctypes), so the harness can give the
figure a contestant would get from ncu for the same kernels, in launch order. Like ncu, the
profiler serialises the kernels it measures: a figure for each kernel alone, not for the stream.
"""

from __future__ import annotations

import ctypes
import subprocess
from collections.abc import Callable
from pathlib import Path

from gpuarena.harness.device import cupti_build

SOURCE = Path(__file__).with_name("range_timer.cpp")
HEADER = "cupti_range_profiler.h"
LIBRARY = "libgpuarena_range_timer.so"
DURATION = "gpu__time_duration.sum"
"""ncu's "Duration", in nanoseconds: the metric the timer reads unless told others."""


def compile_range_timer(cuda: Path, output: Path, link: bool = True) -> subprocess.CompletedProcess:
    """Compile range_timer.cpp against the toolkit at `cuda` into a shared library (link=False:
    the object file only)."""
    return cupti_build.compile_program(SOURCE, cuda, output, link=link, shared=True)


def build_range_timer() -> tuple[Path | None, str]:
    """The range timer's shared library (built once per CUDA install and source), or None and why not."""
    return cupti_build.build(
        SOURCE, LIBRARY, "range timer", HEADER, f"CUPTI's Range Profiler headers ({HEADER}, CUDA 12.6+)", shared=True
    )


class RangeTimerError(RuntimeError):
    """The range profiler could not start or read a window (the CUPTI or CUDA call and its words)."""


class TooManyKernels(RangeTimerError):
    """The window launched as many kernels as the profiler was opened for (max_ranges), or more:
    open it again with more room and run the window again."""


FIRST_RANGES = 128
"""The room a harness profiler opens with. The first window after opening costs host time in
proportion to max_ranges: 0.24 s for 64, 4.4-6.5 s for 4096 on an H100
(bench/research/results/profiler-ahead-NVIDIA-H100.json); a window of more kernels raises
TooManyKernels and the caller grows it by GROWTH, up to MOST_RANGES."""
GROWTH = 8
MOST_RANGES = 8192


class KernelDurations:
    """gpu__time_duration.sum (or the metrics named) for each kernel that `measure(fn)` runs, on
    one device. Open it on the thread that launches the kernels, after the device's CUDA context
    exists (torch made it); one at a time per process, since the library keeps one profiler
    session. Metrics beyond the duration (clocks, cycles, DRAM bytes) explain a duration; if
    they need more than one pass, CUPTI replays each kernel, restoring its memory in between."""

    def __init__(
        self,
        device_index: int,
        max_ranges: int = 4096,
        library: Path | None = None,
        metrics: tuple[str, ...] = (DURATION,),
        synchronize: Callable[[], object] | None = None,
    ):
        """synchronize: waits for the window's kernels (default: torch.cuda.synchronize of the
        device; the harness passes the binding it captured before any solution code ran)."""
        if not metrics or any(not m or "," in m for m in metrics):
            raise ValueError(f"metrics must be non-empty names without commas, got {metrics!r}")
        if library is None:
            library, why = build_range_timer()
            if library is None:
                raise RangeTimerError(why)
        self.device_index = device_index
        self.library = library
        self.max_ranges = max_ranges
        self.metrics = tuple(metrics)
        self._synchronize = synchronize
        try:
            self.lib = ctypes.CDLL(str(library))
        except OSError as exc:  # unreadable, or built for another platform
            raise RangeTimerError(f"cannot load the range timer's library: {exc}") from None
        self.lib.grt_open.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p]
        self.lib.grt_read.argtypes = [ctypes.POINTER(ctypes.c_double), ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        self.lib.grt_error.restype = ctypes.c_char_p
        self.lib.grt_close.restype = None
        self._open = False
        self._check(self.lib.grt_open(device_index, max_ranges, ",".join(self.metrics).encode()))
        self._open = True
        if self.lib.grt_metric_count() != len(self.metrics):
            self.close()
            raise RangeTimerError(f"the library took {self.lib.grt_metric_count()} metrics, not {len(self.metrics)}")

    def _check(self, result: int) -> None:
        if result != 0:
            words = (self.lib.grt_error() or b"").decode(errors="replace") or "range timer failed"
            raise (TooManyKernels if result == 2 else RangeTimerError)(words)

    def measure(self, fn: Callable[[], object]) -> list[float]:
        """Run fn() with the profiler on and return each of its kernels' first metric (the
        duration in ns, unless told otherwise), in launch order."""
        return [row[self.metrics[0]] for row in self.measure_metrics(fn)]

    def measure_metrics(self, fn: Callable[[], object]) -> list[dict[str, float]]:
        """Run fn() with the profiler on and return each of its kernels' metrics, in launch
        order. An error of fn() wins over one of the profiler's, so a failing call keeps its own."""
        self._check(self.lib.grt_start())
        width = len(self.metrics)
        values = (ctypes.c_double * (self.max_ranges * width))()
        count = ctypes.c_int(0)
        try:
            fn()
            self._wait()
        except BaseException:
            self.lib.grt_stop()
            self.lib.grt_read(values, self.max_ranges, ctypes.byref(count))  # leaves the next window empty
            raise
        self._check(self.lib.grt_stop())
        self._check(self.lib.grt_read(values, self.max_ranges, ctypes.byref(count)))
        if count.value >= self.max_ranges:
            # CUPTI records the first max_ranges kernels and drops the rest without a word (H100,
            # driver 580: 384 launches read as 128 under a room of 128,
            # bench/research/range_room_probe.py), so a full room may have overflowed
            raise TooManyKernels(f"the window filled its room of {self.max_ranges} kernels: there may have been more")
        return [dict(zip(self.metrics, values[k * width : (k + 1) * width])) for k in range(count.value)]

    def _wait(self) -> None:
        if self._synchronize is not None:
            self._synchronize()
        else:
            import torch

            torch.cuda.synchronize(self.device_index)

    def close(self) -> None:
        if self._open:
            self._open = False
            self.lib.grt_close()

    def __enter__(self) -> KernelDurations:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
