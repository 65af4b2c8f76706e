"""ncu's own figure for both sides of a workload, after its timed rounds.

The timed rounds give each call's cost on a stream (CUPTI activity records: how long its work
occupies the GPU). ncu, which contestants check their kernels with, reports each kernel
launched alone, its launch and drain included: about 1.3 µs more per kernel on an H100
(bench/results/kernel-overhead-NVIDIA-H100.md), the whole difference on a kernel of a few
microseconds. This phase reads ncu's counter, gpu__time_duration, in-process through CUPTI's
Range Profiler (range_timer.py), for the solution and the reference after the same cache
eviction, so each record carries the figure ncu would give beside the stream cost it is ranked
by. It runs once every workload is timed (measure.measure_kernel_durations): the profiler
admits one process at a time, and its first window after opening costs about 4 s on an H100
(bench/results/range-profiler-NVIDIA-H100.md), so each side opens it once per run rather than
the sides taking turns per block.

Like the stream cost, the solution's figure is reported by the worker. It ranks nothing; a
profiler that cannot run here leaves the figure out and says why, never a verdict.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import torch

from gpuarena.harness import range_timer
from gpuarena.harness.records import WorkloadResult

ROUNDS = 4
"""Blocks of each side per workload (one call per input set each, fresh inputs each): the
counter varies by tens of ns."""

PRIVILEGES = ("the driver lets only admin users read GPU counters, and a worker of its own user is not one: "
              "allow all users (NVreg_RestrictProfilingToAdminUsers=0) or, on a machine you trust, run workers as "
              "the supervisor's user (GPUARENA_WORKER_ISOLATION=0)")
SWITCHED_OFF = "switched off (GPUARENA_KERNEL_DURATION=0 or RunOptions.kernel_duration=False)"
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


def skip(results: list[WorkloadResult], why: str) -> None:
    """No figure for these workloads, and why (the run goes on)."""
    if "INSUFFICIENT_PRIVILEGES" in why:
        why += f" ({PRIVILEGES})"
    for result in results:
        result.kernel_duration_skipped = why


def record(result: WorkloadResult, solution_ns: list[int], reference_ns: list[int]) -> None:
    """Each side's median over its calls, into time and reference_time."""
    for timing, samples in ((result.time, solution_ns), (result.reference_time, reference_ns)):
        if timing is not None and samples:
            timing.kernel_duration_us = statistics.median(samples) / 1e3
            timing.kernel_duration_calls = len(samples)
