"""Taking raw timing samples of calls, one block at a time, on any device.

The same code times the reference (in the supervisor) and the solution (in the worker), so
both are measured alike. A block runs `n` calls; before each, the caller's `prepare(i)`
runs, then the device's backend makes the caches cold (backend_base.ColdCaches: on an NVIDIA
GPU as ncu's `--cache-control all` leaves them, nvidia.py) and the device is synchronised;
none of that is inside the timed window.

Methods (the backend picks one, `Backend.timing_method`):
- ``cpu-perf-counter``: host clock around the call.
- ``cupti-device-time`` (NVIDIA): per call, the busy time of every kernel, copy and memset
  launched while the call ran, from CUPTI activity records (cupti_timing.py).
- ``cuda-sync-wallclock`` (NVIDIA, where CUPTI is unavailable): host clock around the call
  plus a device-wide synchronize.
- ``cupti-range-profiler gpu__time_duration.sum`` (NVIDIA, blocks asked for with
  `kernel_library`): per call, the sum over its kernels of ncu's own "Duration", each kernel
  launched alone (range_timer.py). The figure a contestant's ncu gives; kernels only.

Every method also records the end-to-end time (host clock around call + device sync) so
host-side work stays visible.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.device.block import BlockSamples

if TYPE_CHECKING:
    import torch

    from gpuarena.harness.device.backend_base import Backend

# Captured at import, before any solution code runs, so that patching the module attribute
# later does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_thread_time_ns = time.thread_time_ns

KERNEL_DURATION_METHOD = "cupti-range-profiler gpu__time_duration.sum"


class Timer:
    """Times calls on one device with the best method its backend has."""

    calls_cpu_ns: int | None = None
    """Set to 0 by the reference's twin in the supervisor on the CPU (twin.py), never in a worker: the
    thread's CPU time in each timed call is then added here, read just outside the call's window
    (host-clock blocks only). The windows are clock time, which on a busy machine holds the
    thread's waits for a core: the block's CPU time less the windows left the harness's share
    at 0 in half an honest softmax's blocks beside two other judgings on 2 cores, and the
    worker's bound, allowed nothing for the harness, rejected it."""

    def __init__(
        self,
        device: torch.device,
        method: str | None = None,
        evict: bool = True,
        icache: bool = True,
        icache_image: bytes | None = None,
        backend: Backend | None = None,
        timer_image: bytes | None = None,
    ):
        """icache=False: no instruction-cache sweep (the other side of the run has none, and
        both sides must start each call from the same state); icache_image: the sweep already
        compiled for this device (backend.worker_setup); backend: the device's (default: the
        one its type names); timer_image: the backend's timing library, built by the supervisor
        (backend.worker_setup)."""
        begun = time.perf_counter()
        self.startup_s: dict[str, float] = {}
        """Seconds per step of this set-up (the sweeps' builds, the method's probe)."""
        self.device = device
        self.backend = backend or backend_named(device.type)
        # the instance keeps its own binding: a solution that rebinds the framework's
        # synchronize later (the worker makes its Timer before importing the solution) does
        # not turn the harness's synchronisation into a no-op
        self._synchronize = self.backend.synchronize
        self.caches = self.backend.cold_caches(device, icache and evict, icache_image)
        """What runs between calls (built now: the worker makes its Timer before importing the solution)."""
        self.evict = evict and bool(self.caches.eviction)
        self.eviction = self.caches.eviction if self.evict else ""
        """What runs between calls to make the caches cold, in words (none on the CPU)."""
        self._kernel_profiler: Any = None
        """The range timer while held (open_kernel_profiler)."""
        self.startup_s["sweeps"] = time.perf_counter() - begun
        begun = time.perf_counter()
        self.method = self.backend.timing_method(method, timer_image)
        self.records = self.backend.timer_records() if self.method == self.backend.timer else None
        """Where the method's device records come from (backend.timer_records), in words."""
        self.startup_s["method"] = time.perf_counter() - begun

    @property
    def has_icache_sweep(self) -> bool:
        return self.caches.has_icache_sweep

    # -- between calls -------------------------------------------------------------------
    def evict_caches(self) -> None:
        """What runs before each timed call when evicting: instruction caches, then L2 on a GPU
        (public for the benchmarks that time calls the harness's way)."""
        self.caches.evict()

    def synchronize(self) -> None:
        """Wait for everything launched on the device."""
        self._synchronize(self.device)

    def between(self) -> None:
        """Before each timed call, outside its window: caches cold (where evicting), nothing
        left pinned from the last call, the device idle."""
        if self.evict:
            self.caches.evict()
        self.caches.settle()
        self._synchronize(self.device)

    # -- a block of calls ----------------------------------------------------------------
    def run_block(
        self,
        call: Callable[[int], Any],
        n: int,
        prepare: Callable[[int], None] | None = None,
        after: Callable[[int, Any], None] | None = None,
        evict: bool = True,
        kernel_library: Path | None = None,
    ) -> BlockSamples:
        """Run call(i) for i in range(n); after(i, result) runs outside the window.
        evict=False: no L2 sweep between calls (the device audit's block, where the harness
        should put as little as it can on the GPU). kernel_library: the range timer's library;
        each call's device figure is then its kernels' ncu Duration (raises RangeTimerError
        where the profiler cannot run)."""
        gc_was_enabled = gc.isenabled()
        gc.disable()  # no collector pause inside a timed window
        evicting, self.evict = self.evict, self.evict and evict
        try:
            if kernel_library is not None:
                return self._block_kernel_durations(call, n, prepare, after, kernel_library)
            by_device = self.backend.time_block(self, call, n, prepare, after)
            return by_device if by_device is not None else self._block_wallclock(call, n, prepare, after)
        finally:
            self.evict = evicting
            if gc_was_enabled:
                gc.enable()

    def timed_call(self, call: Callable[[int], Any], i: int) -> tuple[Any, int]:
        """call(i) and the host's nanoseconds from its start until the device has finished it."""
        t0 = _perf_counter_ns()
        result = call(i)
        self._synchronize(self.device)
        return result, _perf_counter_ns() - t0

    def _block_wallclock(self, call, n, prepare, after) -> BlockSamples:
        samples = BlockSamples(method=self.method)
        for i in range(n):
            if prepare:
                prepare(i)
            self.between()
            cpu_before = _thread_time_ns() if self.calls_cpu_ns is not None else 0
            result, elapsed = self.timed_call(call, i)
            if self.calls_cpu_ns is not None:
                self.calls_cpu_ns += _thread_time_ns() - cpu_before
            samples.e2e_ns.append(elapsed)
            samples.device_ns.append(elapsed)
            if after:
                after(i, result)
            del result
        return samples

    def _block_kernel_durations(self, call, n, prepare, after, library: Path) -> BlockSamples:
        from gpuarena.harness.device.range_timer import GROWTH, MOST_RANGES, TooManyKernels

        samples = BlockSamples(method=KERNEL_DURATION_METHOD)
        held = self._kernel_profiler is not None and self._kernel_profiler.library == library
        profiler = self._kernel_profiler if held else self._new_kernel_profiler(library)
        try:
            for i in range(n):
                while True:
                    if prepare:
                        prepare(i)
                    self.between()
                    box: list[Any] = []
                    t0 = _perf_counter_ns()
                    try:
                        durations = profiler.measure(lambda: box.append(call(i)))
                        break
                    except TooManyKernels:
                        if profiler.max_ranges >= MOST_RANGES:
                            raise
                        # more kernels than the profiler had room for: open it again, larger, and
                        # run the call again from its preparation
                        profiler.close()
                        profiler = self._new_kernel_profiler(library, min(profiler.max_ranges * GROWTH, MOST_RANGES))
                        if held:
                            self._kernel_profiler = profiler
                samples.e2e_ns.append(_perf_counter_ns() - t0)
                samples.device_ns.append(round(sum(durations)))
                if after:
                    after(i, box[0])
                box.clear()  # the call's outputs go before the next call
        finally:
            if not held:
                profiler.close()
        return samples

    def _new_kernel_profiler(self, library: Path, max_ranges: int | None = None) -> Any:
        from gpuarena.harness.device.range_timer import FIRST_RANGES, KernelDurations

        return KernelDurations(
            self.backend.pin(self.device).index or 0,
            max_ranges=max_ranges or FIRST_RANGES,
            library=library,
            synchronize=self.synchronize,
        )

    def open_kernel_profiler(self, library: Path) -> None:
        """Hold the range timer for the blocks to come, until close_kernel_profiler(): its first
        window after opening costs host time in proportion to its room for kernels (range_timer.
        FIRST_RANGES), later ones nothing (bench/research/results/range-profiler-NVIDIA-H100.md,
        profiler-ahead-NVIDIA-H100.json). A block given the library without this
        opens it for itself. While it is held no other process can read the GPU's counters; an
        open, idle profiler does not serialise streams."""
        if self._kernel_profiler is not None and self._kernel_profiler.library == library:
            return
        self.close_kernel_profiler()
        self._kernel_profiler = self._new_kernel_profiler(library)

    def close_kernel_profiler(self) -> None:
        """Give the GPU's counters back (to the other process's profiler, the device audit)."""
        profiler, self._kernel_profiler = self._kernel_profiler, None
        if profiler is not None:
            profiler.close()
