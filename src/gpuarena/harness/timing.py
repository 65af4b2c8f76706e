"""Taking raw timing samples of calls, one block at a time.

The same code times the reference (in the supervisor) and the solution (in the worker), so
both are measured alike. A block runs `n` calls; before each, the caller's `prepare(i)`
runs, then (on CUDA) the caches are made cold as ncu's `--cache-control all` leaves them: a
kernel of 236 KB of code takes the call's instructions out of the SMs' instruction caches
(icache_sweep.py), a read sweep takes its data (and that code) out of L2, persisting-L2
lines are reset and the device is synchronised; none of that is inside the timed window.

Methods:
- ``cpu-perf-counter``: host clock around the call.
- ``cupti-device-time`` (CUDA): per call, the busy time (union of intervals) of every kernel,
  copy and memset launched while the call ran, on any stream and from any thread, taken
  from CUPTI activity records through torch.profiler. The harness's own sweep and sync
  are outside the call's window and are not counted.
- ``cuda-sync-wallclock`` (CUDA, fallback when CUPTI is unavailable): host clock around the
  call plus a device-wide synchronize.
- ``cupti-range-profiler gpu__time_duration.sum`` (CUDA, blocks asked for with
  `kernel_library`): per call, the sum over its kernels of ncu's own "Duration", each kernel
  launched alone (range_timer.py). The figure a contestant's ncu gives; kernels only.

Every method also records the end-to-end time (host clock around call + device sync) so
host-side work stays visible.
"""

from __future__ import annotations

import bisect
import ctypes
import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from gpuarena.harness import icache_sweep

# Captured at import, before any solution code runs, so that patching the module attributes
# later does not change what the harness calls.
_perf_counter_ns = time.perf_counter_ns
_cuda_synchronize = torch.cuda.synchronize

CALL_RANGE = "gpuarena::timed_call"
HARNESS_RANGE = "gpuarena::harness"
"""The harness's own work between calls (cache sweeps, poisoning, copying outputs out): what
is launched in it is nobody's. Anything else launched outside the calls' windows is billed
to the call before it (work a solution defers past its return)."""
KERNEL_DURATION_METHOD = "cupti-range-profiler gpu__time_duration.sum"
CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


@dataclass
class BlockSamples:
    device_ns: list[int] = field(default_factory=list)
    e2e_ns: list[int] = field(default_factory=list)
    method: str = ""


def _libcuda() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None


def l2_read_sweep(device: torch.device) -> Callable[[], None]:
    """A function that reads (never writes) a buffer a few times larger than L2, so the next
    call starts with a clean, cold L2 and no write-back of ours is billed to it."""
    l2 = torch.cuda.get_device_properties(device).L2_cache_size or (64 << 20)
    sweep = torch.ones(max(3 * l2, 128 << 20) // 4, dtype=torch.float32, device=device)
    sink = torch.empty((), dtype=torch.float32, device=device)
    return lambda: torch.sum(sweep, dim=0, out=sink)


class Timer:
    """Times calls on one device with the best method available there."""

    def __init__(self, device: torch.device, method: str | None = None, evict: bool = True,
                 icache: bool = True, icache_image: bytes | None = None):
        """icache=False: no instruction-cache sweep (the other side of the run has none, and
        both sides must start each call from the same state); icache_image: the sweep already
        compiled for this device (icache_sweep.image)."""
        begun = time.perf_counter()
        self.startup_s: dict[str, float] = {}
        """Seconds per step of this set-up (the sweeps' builds, the method's probe)."""
        self.device = device
        self.is_cuda = device.type == "cuda"
        self.evict = evict and self.is_cuda
        # the instance keeps its own binding: a solution that rebinds the module's
        # _cuda_synchronize (the worker makes its Timer before importing the solution) does not
        # turn the harness's synchronisation into a no-op
        self._synchronize = _cuda_synchronize
        self._sweep: Callable[[], None] | None = None
        self._icache_sweep: Callable[[], None] | None = None
        self.eviction = ""
        """What runs between calls to make the caches cold, in words (CUDA)."""
        if self.evict:
            # built now: the worker makes its Timer before importing the solution
            why = "not asked for"
            if icache:
                self._icache_sweep, why = icache_sweep.build(device, icache_image)
            self.eviction = "L2 read sweep (3 x L2), " + (
                f"instruction-cache sweep ({icache_sweep.OPS} FMAs of straight-line code)" if self._icache_sweep
                else f"no instruction-cache sweep ({why})")
        self._libcuda = _libcuda() if self.is_cuda else None
        self._kernel_profiler: Any = None
        """The range timer while held (open_kernel_profiler)."""
        self.startup_s["sweeps"] = time.perf_counter() - begun
        begun = time.perf_counter()
        if not self.is_cuda:
            # Supervisor and worker time in turn on the same cores: one thread each, so an idle
            # process's spinning thread pool cannot steal cycles from the one being timed.
            torch.set_num_threads(1)
            self.method = "cpu-perf-counter"
        elif method:
            self.method = method
        else:
            self.method = "cupti-device-time" if _cupti_available() else "cuda-sync-wallclock"
        self.startup_s["method"] = time.perf_counter() - begun

    @property
    def has_icache_sweep(self) -> bool:
        return self._icache_sweep is not None

    # -- between calls -------------------------------------------------------------------
    def evict_caches(self) -> None:
        """What runs before each timed call on CUDA: instruction caches, then L2 (public for
        the benchmarks that time calls the harness's way)."""
        if self._icache_sweep is not None:
            self._icache_sweep()
        if self._sweep is None:
            self._sweep = l2_read_sweep(self.device)
        self._sweep()

    def _reset_persisting_l2(self) -> None:
        """No persisting-L2 window survives into the next call: where a limit was set (only
        then can lines persist), persisting lines are reset and the limit goes back to 0."""
        if self._libcuda is None:
            return
        limit = ctypes.c_size_t(0)
        self._libcuda.cuCtxGetLimit(ctypes.byref(limit), CU_LIMIT_PERSISTING_L2_CACHE_SIZE)
        if limit.value:
            self._libcuda.cuCtxResetPersistingL2Cache()
            self._libcuda.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctypes.c_size_t(0))

    def _between(self) -> None:
        if self.is_cuda:
            if self.evict:
                self.evict_caches()
            self._reset_persisting_l2()
            self._synchronize(self.device)

    # -- a block of calls ----------------------------------------------------------------
    def run_block(self, call: Callable[[int], Any], n: int, prepare: Callable[[int], None] | None = None,
                  after: Callable[[int, Any], None] | None = None, evict: bool = True,
                  kernel_library: Path | None = None) -> BlockSamples:
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
            if self.method == "cupti-device-time":
                return self._block_cupti(call, n, prepare, after)
            return self._block_wallclock(call, n, prepare, after)
        finally:
            self.evict = evicting
            if gc_was_enabled:
                gc.enable()

    def _one(self, call: Callable[[int], Any], i: int) -> tuple[Any, int]:
        t0 = _perf_counter_ns()
        result = call(i)
        if self.is_cuda:
            self._synchronize(self.device)
        return result, _perf_counter_ns() - t0

    def _block_wallclock(self, call, n, prepare, after) -> BlockSamples:
        samples = BlockSamples(method=self.method)
        for i in range(n):
            if prepare:
                prepare(i)
            self._between()
            result, elapsed = self._one(call, i)
            samples.e2e_ns.append(elapsed)
            samples.device_ns.append(elapsed)
            if after:
                after(i, result)
            del result
        return samples

    def _block_kernel_durations(self, call, n, prepare, after, library: Path) -> BlockSamples:
        samples = BlockSamples(method=KERNEL_DURATION_METHOD)
        held = self._kernel_profiler is not None and self._kernel_profiler.library == library
        profiler = self._kernel_profiler if held else self._new_kernel_profiler(library)
        try:
            for i in range(n):
                if prepare:
                    prepare(i)
                self._between()
                box: list[Any] = []
                t0 = _perf_counter_ns()
                durations = profiler.measure(lambda: box.append(call(i)))
                samples.e2e_ns.append(_perf_counter_ns() - t0)
                samples.device_ns.append(round(sum(durations)))
                if after:
                    after(i, box[0])
                box.clear()  # the call's outputs go before the next call
        finally:
            if not held:
                profiler.close()
        return samples

    def _new_kernel_profiler(self, library: Path) -> Any:
        from gpuarena.harness.range_timer import KernelDurations

        index = self.device.index if self.device.index is not None else (
            torch.cuda.current_device() if self.is_cuda else 0)
        wait = (lambda: self._synchronize(self.device)) if self.is_cuda else (lambda: None)
        return KernelDurations(index, library=library, synchronize=wait)

    def open_kernel_profiler(self, library: Path) -> None:
        """Hold the range timer for the blocks to come, until close_kernel_profiler(): its first
        window after opening costs about 4 s on an H100, later ones nothing
        (bench/research/results/range-profiler-NVIDIA-H100.md). A block given the library without this
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

    def _block_cupti(self, call, n, prepare, after) -> BlockSamples:
        from torch.autograd.profiler import record_function

        samples = BlockSamples(method=self.method)
        with kineto_profile() as prof:
            for i in range(n):
                with record_function(HARNESS_RANGE):
                    if prepare:
                        prepare(i)
                    self._between()
                with record_function(CALL_RANGE):
                    result, elapsed = self._one(call, i)
                samples.e2e_ns.append(elapsed)
                with record_function(HARNESS_RANGE):
                    if after:
                        after(i, result)
                    del result
                    if self.is_cuda:
                        self._synchronize(self.device)  # what after() launched ends before the next call
        samples.device_ns = device_busy_ns(prof.kineto_results.events(), n)
        return samples


def kineto_profile(cpu: bool = True) -> Any:
    """PyTorch's Kineto profiler recording CUDA activities (and host ranges with cpu=True); its
    `kineto_results` hold the raw events once it exits. This is what torch.profiler.profile
    wraps, minus its prepare_trace, which asks hasattr(torch, "_inductor"): torch imports
    submodules lazily on attribute access, so that question imports inductor and dynamo
    (5.7 s in the supervisor on the H100, docs/harness.md) in every process that times."""
    from torch.autograd.profiler import profile

    return profile(use_device="cuda", use_kineto=True, use_cpu=cpu)


_GPU_ACTIVITY_CATEGORIES = ("kernel", "memcpy", "memset", "gpu_memcpy", "gpu_memset")


def device_busy_ns(events: list[Any], n_calls: int) -> list[int]:
    """Per timed call, the union of the device intervals of all work it launched.

    GPU activities are attributed to a call through the host-side CUDA runtime or driver
    call that launched them (same correlation id; host clock; any thread): a launch inside
    the call's window belongs to it, whichever stream the work ran on. A launch inside one of
    the harness's own ranges (HARNESS_RANGE: sweeps, poisoning, copying out) is nobody's;
    any other launch outside the windows (work the solution deferred past its return, into
    a hook on the harness's own operations, say) is billed to the call before it. GPU-side
    user annotations (record_function ranges mirrored on the GPU timeline) are not work and
    are skipped: they would count the gaps between kernels.
    """
    windows: list[tuple[int, int]] = []
    harness: list[tuple[int, int]] = []
    launches: dict[int, int] = {}
    gpu: list[tuple[int, int, int]] = []
    for e in events:
        if e.device_type() == torch.autograd.DeviceType.CPU:
            name = e.name()
            if name == CALL_RANGE:
                windows.append((e.start_ns(), e.start_ns() + e.duration_ns()))
            elif name == HARNESS_RANGE:
                harness.append((e.start_ns(), e.start_ns() + e.duration_ns()))
            elif name.startswith("cu") and e.correlation_id():  # cudaLaunchKernel, cuLaunchKernelEx, ...
                launches[e.correlation_id()] = e.start_ns()
        elif not _is_annotation(e):
            gpu.append((e.correlation_id(), e.start_ns(), e.start_ns() + e.duration_ns()))
    windows.sort()
    if len(windows) != n_calls:
        raise RuntimeError(f"profiler saw {len(windows)} timed windows for {n_calls} calls")
    per_call: list[list[tuple[int, int]]] = [[] for _ in windows]
    starts = [w[0] for w in windows]
    harness.sort()
    harness_starts = [h[0] for h in harness]
    for corr, start, end in gpu:
        stamp = launches.get(corr, start)
        k = _window_index(starts, windows, stamp)
        if k is None:
            if _window_index(harness_starts, harness, stamp) is not None:
                continue  # the harness's own
            k = max(bisect.bisect_right(starts, stamp) - 1, 0)  # deferred: the call before it pays
        if per_call:
            per_call[k].append((start, end))
    return [_union_length(intervals) for intervals in per_call]


def _is_annotation(event: Any) -> bool:
    check = getattr(event, "is_user_annotation", None)
    if check is not None and check():
        return True
    return event.name() == CALL_RANGE


def _window_index(starts: list[int], windows: list[tuple[int, int]], stamp: int) -> int | None:
    k = bisect.bisect_right(starts, stamp) - 1
    if k >= 0 and stamp <= windows[k][1]:
        return k
    return None


def _union_length(intervals: list[tuple[int, int]]) -> int:
    total, current_end = 0, None
    current_start = 0
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


_CUPTI_OK: bool | None = None


def _cupti_available() -> bool:
    """Whether torch.profiler records CUDA kernels here (CUPTI present and allowed)."""
    global _CUPTI_OK
    if _CUPTI_OK is None:
        try:
            x = torch.ones(1024, device="cuda")
            with kineto_profile(cpu=False) as prof:
                (x * 2).sum()
                torch.cuda.synchronize()
            _CUPTI_OK = any(e.device_type() != torch.autograd.DeviceType.CPU
                            for e in prof.kineto_results.events())
        except Exception:
            _CUPTI_OK = False
    return _CUPTI_OK
