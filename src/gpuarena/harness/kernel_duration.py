"""ncu's own figure for both sides of a workload, after its timed rounds.

The timed rounds give each call's cost on a stream (CUPTI activity records: how long its work
occupies the GPU). ncu, which contestants check their kernels with, reports each kernel
launched alone, its launch and drain included: about 1.3 µs more per kernel on an H100
(bench/research/results/kernel-overhead-NVIDIA-H100.md), the whole difference on a kernel of a few
microseconds. This phase reads ncu's counter, gpu__time_duration, in-process through CUPTI's
Range Profiler (range_timer.py), for the solution and the reference after the same cache
eviction, so each record carries the figure ncu would give beside the stream cost it is ranked
by. It runs once every workload is timed (measure() below): the profiler
admits one process at a time, and its first window after opening costs host time in proportion
to its room for kernels (about 4 s on an H100 with room for 4096, 0.24 s with 64:
bench/research/results/range-profiler-NVIDIA-H100.md, profiler-ahead-NVIDIA-H100.json), so each
side opens it once per run, with little room that grows when a call fills it (timing.Timer),
rather than the sides taking turns per block.

Like the stream cost, the solution's figure is reported by the worker. It ranks nothing, so it
is read only when asked for (`asked`); a profiler that cannot run here leaves the figure out
and says why, never a verdict. The reference's figure depends on nothing a solution does, so it
is cached on disk per problem version, workload, device and software (reference_cache_key): a
later run of the same workload opens the profiler on the worker's side only.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from gpuarena import HARNESS_VERSION
from gpuarena.cache import cache_dir
from gpuarena.contracts import messages
from gpuarena.contracts.records import Status, WorkloadResult
from gpuarena.harness.device import range_timer
from gpuarena.harness.device.range_timer import RangeTimerError
from gpuarena.harness.failure import RunFailure
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.launch.started import _switch
from gpuarena.harness.measure import check_outputs, reference_call, refresh_sets
from gpuarena.harness.session import WorkloadSession
from gpuarena.problems.pack import pack_problem

if TYPE_CHECKING:
    from gpuarena.harness.run_context import RunContext

ROUNDS = 4
"""Blocks of each side per workload at most (one call per input set each, fresh inputs each),"""
LEAST_CALLS = 8
"""until each side has this many calls: the counter varies by tens of ns, so the median of 8 is
as good as of 64, and each round draws every set afresh (on GPU MODE's vectoradd, 16 sets, the
phase's four rounds took 1.0 s of a 7.6 s verdict; on KernelBench's 6.4 GB softmax, 2.5 s)."""


def rounds(n_sets: int) -> int:
    """Blocks of each side for a workload of `n_sets` sets (LEAST_CALLS calls, ROUNDS at most)."""
    return max(1, min(ROUNDS, -(-LEAST_CALLS // max(n_sets, 1))))


PRIVILEGES = (
    "the driver lets only admin users read GPU counters, and a worker of its own user is not one: "
    "allow all users (NVreg_RestrictProfilingToAdminUsers=0) or, on a machine you trust, run workers as "
    "the supervisor's user (GPUARENA_WORKER_ISOLATION=0)"
)
SWITCHED_OFF = "switched off (GPUARENA_KERNEL_DURATION=0 or RunOptions.kernel_duration=False)"
NOT_ASKED = (
    "not asked for: read with --ncu (GPUARENA_KERNEL_DURATION=1 or RunOptions.kernel_duration=True); it ranks "
    "nothing and is the worker's own reading"
)


def switched_off(by_choice: bool) -> str:
    """Why a run has no ncu figure when the phase did not run: turned off, or not asked for."""
    return SWITCHED_OFF if by_choice else NOT_ASKED


_LIBRARY: tuple[Path | None, str] | None = None


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


def asked(option: bool | None) -> bool:
    """Whether the phase runs (on every timed workload): RunOptions.kernel_duration, else
    GPUARENA_KERNEL_DURATION, else not, in every mode. A ranked verdict read it on one workload
    until 2026-11-30: it ranks nothing, the figure is the worker's own (the supervisor cannot
    read it from outside), and it cost 0.8-0.9 s of a 6-8 s warm verdict on GPU MODE's vectoradd
    (H200) and as much again in the next job, whose device-audit sampler it had quit (the range
    profiler and the PM sampler hold the same counters). The timing's fidelity to ncu is the
    fidelity bench's to show (bench/fidelity.py)."""
    if option is not None:
        return option
    return _switch("GPUARENA_KERNEL_DURATION", False)


def record(result: WorkloadResult, solution_ns: list[int], reference_ns: list[int]) -> None:
    """Each side's median over its calls, into time and reference_time."""
    for timing, samples in ((result.time, solution_ns), (result.reference_time, reference_ns)):
        if timing is not None and samples:
            timing.kernel_duration_us = statistics.median(samples) / 1e3
            timing.kernel_duration_calls = len(samples)


def measure(supervisor: RunContext, worker: WorkerProcess, timed: list[tuple[WorkloadSession, WorkloadResult]]) -> None:
    """ncu's figure for every timed workload, once all are timed.

    CUPTI's Range Profiler admits one process at a time and its first window after opening
    costs host time, so each side opens it once per run: first the worker, for the solution's
    rounds on every workload (fresh inputs, outputs checked as in the timed rounds), then the
    supervisor, for the reference's. The device audit's sampler, which holds the same
    counters, is quit first."""
    path, why = library()
    if path is None:
        skip([result for _, result in timed], why)
        return
    supervisor.release_sampler()
    solution: dict[str, list[int]] = {}
    reference: dict[str, list[int]] = {}
    try:
        for session, result in timed:
            name = session.workload.name
            worker.ask(messages.Select(workload=name), supervisor.deadline, f"returning to {name}")
            try:
                solution[name] = _rounds(
                    session,
                    lambda: _solution_kernels(supervisor, worker, session, path),
                    lambda: check_outputs(supervisor, session, f"reading kernel durations on {name}"),
                )
            except RunFailure as failure:
                if failure.status == Status.WRONG_VALUES:
                    # outputs the timed rounds found right come out wrong under the profiler: CUDA
                    # graphs are not replayed under it (H100, 2026-11-23: an honest graph-replay
                    # softmax). No figure for this workload; never a verdict from the profiler
                    skip([result], f"the solution's outputs were wrong under CUPTI's Range Profiler ({failure.reason})")
                    continue
                result.status, result.reason = failure.status, failure.reason  # the verdict is on its calls
                raise RunFailure(failure.status, f"workload {name}: {failure.reason}", failure.detail) from None
        # (a failure above ends the run, and the worker with it, which frees the counters)
        worker.ask(messages.CloseKernelProfiler(), supervisor.deadline, "closing the worker's profiler")
        keys = {session.workload.name: reference_cache_key(supervisor, session, path) for session, _ in timed}
        cached = {name: samples for name, samples in ((name, _cached(key)) for name, key in keys.items()) if samples}
        reference.update(cached)
        missing = [
            session for session, _ in timed if session.workload.name in solution and session.workload.name not in cached
        ]
        timer = supervisor.timer
        assert timer is not None
        try:
            if missing:
                timer.open_kernel_profiler(path)
            for session in missing:
                call = reference_call(session)
                reference[session.workload.name] = samples = _rounds(
                    session, lambda: timer.run_block(call, len(session.sets), kernel_library=path).device_ns, None
                )
                _store(keys[session.workload.name], samples)
        finally:
            timer.close_kernel_profiler()
    except (Unavailable, RangeTimerError) as exc:
        skip([result for _, result in timed], f"CUPTI's Range Profiler failed here: {exc}")
        return
    for session, result in timed:
        if session.workload.name in solution:
            record(result, solution[session.workload.name], reference[session.workload.name])
            if result.reference_time is not None and session.workload.name in cached:
                result.reference_time.kernel_duration_cached = True
    for session, result in timed:
        problem = stream_cost_understated(result)
        if problem:
            result.status, result.reason = Status.REJECTED, problem
            raise RunFailure(Status.REJECTED, f"workload {session.workload.name}: {problem}")


CONSISTENCY_FACTOR = 2.5
CONSISTENCY_SLACK_US = 10.0
"""ncu's Duration of the same calls may exceed their stream cost by launch and drain (about
1.3 µs per kernel on an H100) and colder caches; a solution whose ncu figure is above 2.5
times its stream cost plus 10 µs did work its timed window did not see."""


def stream_cost_understated(result: WorkloadResult) -> str:
    """Why the solution's stream cost cannot be its calls' cost, given ncu's Duration of the
    same calls ('' when it can)."""
    timing = result.time
    if timing is None or timing.kernel_duration_us is None:
        return ""
    bound = CONSISTENCY_FACTOR * timing.median_us + CONSISTENCY_SLACK_US
    if timing.kernel_duration_us <= bound:
        return ""
    return (
        f"ncu's Duration of the solution's calls ({timing.kernel_duration_us:.2f} µs) is far above their timed "
        f"stream cost ({timing.median_us:.2f} µs; at most {CONSISTENCY_FACTOR} × it + {CONSISTENCY_SLACK_US:.0f} "
        "µs is launch overhead and colder caches): the timed calls did not show all of their work"
    )


def reference_cache_key(supervisor: RunContext, session: WorkloadSession, library: Path) -> str:
    """What the reference's ncu figure depends on: the problem's files, the workload, the
    number of calls, the device (its UUID), the driver, PyTorch, CUDA, the range timer's build
    and the harness. Inputs are drawn fresh each run; the figure's spread between draws is tens
    of ns (ROUNDS)."""
    env = supervisor.environment
    facts = {
        "problem": pack_problem(supervisor.problem).hash,
        "workload": session.workload.model_dump(mode="json"),
        "calls": len(session.sets) * rounds(len(session.sets)),
        "device": (env.device_uuid or env.device_name) if env else str(supervisor.device),
        "driver": env.driver_version if env else None,
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "timer": hashlib.sha256(library.read_bytes()).hexdigest(),
        "harness": HARNESS_VERSION,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


def _cache_file(key: str) -> Path:
    return cache_dir() / "reference-ncu" / f"{key}.json"


def _cached(key: str) -> list[int] | None:
    try:
        samples = json.loads(_cache_file(key).read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(samples, list) and samples and all(type(v) is int and v >= 0 for v in samples)
    return samples if ok else None


def _store(key: str, samples: list[int]) -> None:
    target = _cache_file(key)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{hashlib.sha256(str(samples).encode()).hexdigest()[:8]}.tmp")
    partial.write_text(json.dumps(samples))
    partial.replace(target)


def _rounds(session: WorkloadSession, block: Callable[[], list[int]], check: Callable[[], None] | None) -> list[int]:
    samples: list[int] = []
    for r in range(rounds(len(session.sets))):
        refresh_sets(session, r, "kernel-duration")
        samples += block()
        if check is not None:
            check()
    return samples


def _solution_kernels(
    supervisor: RunContext, worker: WorkerProcess, session: WorkloadSession, library: Path
) -> list[int]:
    n_sets = len(session.sets)
    reply = worker.ask(
        messages.Time(n=n_sets, kernel_library=str(_for_the_worker(library, worker)), seeds=session.seeds),
        supervisor.deadline,
        f"reading kernel durations on {session.workload.name}",
    )
    if reply.kernel_error is not None:
        raise Unavailable(reply.kernel_error)
    dev = reply.device_ns
    if not (dev is not None and len(dev) == n_sets and all(v >= 0 for v in dev)):
        raise RunFailure(Status.REJECTED, "the worker returned malformed kernel durations")
    return dev


def _for_the_worker(library: Path, worker: WorkerProcess) -> Path:
    """A copy of the range timer's library the worker can load: a worker of its own user cannot
    read the supervisor's cache. It goes in the run's folder, which is the supervisor's (the
    worker can reach a file there by name but create nothing), so the worker cannot plant a
    link for the supervisor to write through."""
    copy = worker.log_path.parent / library.name
    if not copy.exists():
        shutil.copyfile(library, copy)
        copy.chmod(0o755)
    return copy
