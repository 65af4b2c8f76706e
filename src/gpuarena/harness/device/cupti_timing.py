"""The NVIDIA backend's timing method, ``cupti-device-time``: per call, the busy time (union of
intervals) of every kernel, copy and memset launched while the call ran, on any stream and
from any thread, taken from CUPTI activity records: through the harness's own collector
(activity_timer.py) where it loads, else through PyTorch's Kineto profiler, which reads the same
records at 10-15 ms of host time more per block. The harness's own sweep and sync are outside
the call's window and are not counted."""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

import torch

from gpuarena.harness.device import activity_timer
from gpuarena.harness.device.block import CALL_RANGE, HARNESS_RANGE, BlockSamples, BlockTimer

METHOD = "cupti-device-time"


class SweepsUnseen(activity_timer.ActivityTimerError):
    """The block's own cache sweeps left no activity record: something else in the process took
    CUPTI's records during the block, so no call's figure can be trusted."""


def cupti_block(
    timer: BlockTimer,
    call: Callable[[int], Any],
    n: int,
    prepare: Callable[[int], None] | None,
    after: Callable[[int, Any], None] | None,
) -> BlockSamples:
    """Time n calls as Timer.run_block does, each call's device figure from CUPTI's records."""
    native = activity_timer.loaded()
    if native is not None:
        return native_block(native, timer, call, n, prepare, after)
    from torch.autograd.profiler import record_function

    samples = BlockSamples(method=timer.method)
    with kineto_profile() as prof:
        for i in range(n):
            with record_function(HARNESS_RANGE):
                if prepare:
                    prepare(i)
                timer.between()
            with record_function(CALL_RANGE):
                result, elapsed = timer.timed_call(call, i)
            samples.e2e_ns.append(elapsed)
            with record_function(HARNESS_RANGE):
                if after:
                    after(i, result)
                del result
                timer.synchronize()  # what after() launched ends before the next call
    samples.device_ns = device_busy_ns(prof.kineto_results.events(), n)
    return samples


def native_block(
    native: activity_timer.ActivityTimer,
    timer: BlockTimer,
    call: Callable[[int], Any],
    n: int,
    prepare: Callable[[int], None] | None,
    after: Callable[[int, Any], None] | None,
) -> BlockSamples:
    """cupti_block through the harness's collector: each call and each harness step between calls
    marked on CUPTI's clock, and the records attributed by their launches (activity_timer.cpp)."""
    samples = BlockSamples(method=timer.method)
    now = native.now
    calls: list[int] = []
    harness: list[int] = []
    native.begin()
    try:
        for i in range(n):
            mark = now()
            if prepare:
                prepare(i)
            timer.between()
            harness += (mark, now())
            mark = now()
            result, elapsed = timer.timed_call(call, i)
            calls += (mark, now())
            samples.e2e_ns.append(elapsed)
            mark = now()
            if after:
                after(i, result)
            del result
            timer.synchronize()  # what after() launched ends before the next call
            harness += (mark, now())
    except BaseException:
        native.end(calls, harness)  # the activity kinds off again, whatever happened
        raise
    samples.device_ns, own = native.end(calls, harness)
    if own < n and getattr(timer, "evict", False):  # every between() launched the sweeps
        raise SweepsUnseen(
            f"the harness's own cache sweeps left {own} activity records in {n} calls: "
            "something else took CUPTI's records during the block"
        )
    return samples


def kineto_profile(cpu: bool = True) -> Any:
    """PyTorch's Kineto profiler recording CUDA activities (and host ranges with cpu=True); its
    `kineto_results` hold the raw events once it exits. This is what torch.profiler.profile
    wraps, minus its prepare_trace, which asks hasattr(torch, "_inductor"): torch imports
    submodules lazily on attribute access, so that question imports inductor and dynamo
    (5.7 s in the supervisor on the H100, docs/harness.md) in every process that times."""
    from torch.autograd.profiler import profile

    return profile(use_device="cuda", use_kineto=True, use_cpu=cpu)


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


def available(image: bytes | None = None) -> bool:
    """Whether CUPTI records CUDA kernels here (present and allowed): through the harness's own
    collector (the worker's from `image`, the library's bytes) if it loads and sees a kernel,
    else through torch.profiler. The first block is run here, in the harness's set-up: it starts
    CUPTI's threads before any solution code, so they are the harness's."""
    global _CUPTI_OK
    if _CUPTI_OK is None:
        native = activity_timer.load(image)
        if native is not None:
            try:
                x = torch.ones(1024, device="cuda")
                native.begin()
                mark = native.now()
                (x * 2).sum()
                torch.cuda.synchronize()
                device_ns, _ = native.end([mark, native.now()], [])
                if device_ns[0] > 0:
                    _CUPTI_OK = True
                    return True
                activity_timer.unload("the collector saw no kernel in its probe")
            except RuntimeError as exc:  # CUPTI's refusal (ActivityTimerError) or CUDA's
                activity_timer.unload(f"the collector's probe failed: {exc}")
        try:
            x = torch.ones(1024, device="cuda")
            with kineto_profile(cpu=False) as prof:
                (x * 2).sum()
                torch.cuda.synchronize()
            _CUPTI_OK = any(e.device_type() != torch.autograd.DeviceType.CPU for e in prof.kineto_results.events())
        except Exception:
            _CUPTI_OK = False
    return _CUPTI_OK
