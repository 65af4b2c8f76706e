"""ncu's own figure for both sides of a workload, after its timed rounds.

The timed rounds give each call's cost on a stream (CUPTI activity records: how long its work
occupies the GPU). ncu, which contestants check their kernels with, reports each kernel
launched alone, its launch and drain included: about 1.3 µs more per kernel on an H100
(bench/results/kernel-overhead-NVIDIA-H100.md), the whole difference on a kernel of a few
microseconds. This phase reads ncu's counter, gpu__time_duration, in-process through CUPTI's
Range Profiler (range_timer.py), for the reference and the solution in interleaved blocks
after the same cache eviction, so each record carries the figure ncu would give beside the
stream cost it is ranked by.

Like the stream cost, the solution's figure is reported by the worker. It ranks nothing; a
profiler that cannot run here leaves the figure out and says why, never a verdict.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Callable

import torch

from gpuarena.harness import range_timer
from gpuarena.harness.records import WorkloadResult

ROUNDS = 4
"""Blocks of each side (one call per input set each): the counter varies by tens of ns."""

PRIVILEGES = ("the driver lets only admin users read GPU counters, and a worker of its own user is not one: "
              "allow all users (NVreg_RestrictProfilingToAdminUsers=0) or, on a machine you trust, run workers as "
              "the supervisor's user (GPUARENA_WORKER_ISOLATION=0)")
_LIBRARY: tuple[Path | None, str] | None = None


def applies(device: torch.device) -> bool:
    """The Range Profiler reads an NVIDIA GPU's counters: CUDA devices only. A test turns it
    on for the CPU with a stand-in library."""
    return device.type == "cuda"


def library() -> tuple[Path | None, str]:
    """The range timer's library, built once per process (and cached on disk per CUDA
    install), or None and why not."""
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = range_timer.build_range_timer()
    return _LIBRARY


class Unavailable(Exception):
    """The profiler could not give the figure here (its words); the run goes on without it."""


def measure(result: WorkloadResult, refresh: Callable[[int], None],
            reference_block: Callable[[Path], list[int]], solution_block: Callable[[Path], list[int]],
            check: Callable[[], None]) -> None:
    """ROUNDS rounds of fresh inputs, a reference block and a solution block (alternating
    which goes first), each call's kernels' durations summed; the outputs are checked after
    each round as in the timed rounds. Sets time.kernel_duration_us and
    reference_time.kernel_duration_us, or result.kernel_duration_skipped."""
    path, why = library()
    if path is None:
        result.kernel_duration_skipped = why
        return
    reference: list[int] = []
    solution: list[int] = []
    try:
        for r in range(ROUNDS):
            refresh(r)
            for who in (("sol", "ref") if r % 2 == 0 else ("ref", "sol")):
                (solution if who == "sol" else reference).extend(
                    solution_block(path) if who == "sol" else reference_block(path))
            check()
    except (Unavailable, range_timer.RangeTimerError) as exc:
        result.kernel_duration_skipped = f"CUPTI's Range Profiler failed here: {exc}"
        if "INSUFFICIENT_PRIVILEGES" in str(exc):
            result.kernel_duration_skipped += f" ({PRIVILEGES})"
        return
    for timing, samples in ((result.time, solution), (result.reference_time, reference)):
        if timing is not None and samples:
            timing.kernel_duration_us = statistics.median(samples) / 1e3
            timing.kernel_duration_calls = len(samples)
