"""The timing phase of one workload: reference (A) and solution (B) in interleaved blocks.

Each round refreshes every input set with fresh random data (outside any timed region),
times one block of the reference in the supervisor and one block of the solution in the
worker (alternating which goes first), then checks, in this order, that no input changed
(bit for bit, against the supervisor's private copy), the outputs of a timed call chosen
only now (the worker keeps every call's outputs; expected values come from the private
copy), and that the worker's samples fit the supervisor's own clocks. It stops once it has
the minimum sample count and either both medians' 95% intervals are within ±1% or the
budget is spent.

The bound on the samples (`TimeBudget`): the worker's times are measured inside the
solution's process, which can rewrite the clock, the timer or the reply. The supervisor
knows two things the solution cannot change: its own clock around each `time` request, and
the worker's CPU time over it (the kernel's account of all the worker's threads). The
reported wall times of a block cannot sum to more than the request took, and on the CPU,
where all work is CPU time, they cannot sum to less than the worker's CPU time, spread over
at most the cores it may use, less the harness's own per-call and per-request work.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gpuarena.harness import peaks
from gpuarena.harness.compare import compare
from gpuarena.harness.process import RunFailure, WorkerProcess
from gpuarena.harness.records import SpeedOfLight, Timing, WorkloadResult
from gpuarena.harness.stats import bootstrap_median, bootstrap_ratio, converged

if TYPE_CHECKING:
    from gpuarena.harness.supervisor import Supervisor, WorkloadSession

WARMUP_CALLS = 3
CHECKED_PER_BLOCK = 1
"""Timed calls whose outputs are compared in each block, chosen after it has run."""

HARNESS_MARGIN = 2.0
"""The worker's own work per timed call (outside the call's window: poisoning destinations,
copying the outputs out, the checks on them, the loop) is allowed this multiple of what the
same harness code costs in the supervisor with a solve() that does nothing,"""
HARNESS_NS_PER_CALL = 20_000
"""plus this much per call (allocator and cache effects the no-op does not show),"""
HARNESS_NS_PER_REQUEST = 300_000
"""plus this much per `time` request (receiving it, the block's set-up, the reply)."""


def harness_cost_ns(supervisor: Supervisor, session: WorkloadSession, rounds: int = 3) -> int:
    """CPU time per timed call of the worker's own code around a call, measured here: the
    worker's `time` on a Worker object in this process, with a solve() that does nothing and
    outputs shaped like the real ones. Trusted: no solution code runs in this process."""
    from gpuarena.harness.worker import Worker

    worker = Worker(None)  # type: ignore[arg-type]
    worker.timer = supervisor.timer
    worker.convention = supervisor.problem.spec.convention
    worker.input_names = session.input_names
    worker.output_names = supervisor.problem.spec.outputs
    # the shared buffers themselves (file mappings on the CPU, slower to write than private
    # memory); the loop refills them before every block
    worker.sets = session.sets
    worker.dests = session.dests
    calls = len(session.sets)
    outputs = [torch.empty_like(d) for d in session.dests[0]]
    worker.solve = lambda *args: None if worker.convention == "destination" else tuple(outputs)
    best = None
    for _ in range(rounds):
        started = time.thread_time_ns()
        try:
            worker.time({"n": calls})
        except Exception:  # e.g. another thread of this process started one meanwhile
            continue
        spent = (time.thread_time_ns() - started) // calls
        best = spent if best is None else min(best, spent)
    return best if best is not None else 200_000


class TimeBudget:
    """The supervisor-side bound on the worker's reported times (see the module docstring)."""

    def __init__(self, cpu: bool, cores: int, harness_ns: int):
        self.cpu, self.cores = cpu, max(1, cores)
        self.per_call = HARNESS_MARGIN * harness_ns + HARNESS_NS_PER_CALL
        self.reported = 0
        self.worker_cpu = 0
        self.calls = 0
        self.requests = 0
        self.measured = True

    def add(self, e2e_ns: list[int], wall_ns: int, worker_cpu_ns: int | None) -> None:
        reported = sum(e2e_ns)
        if reported > wall_ns:
            raise RunFailure("REJECTED", f"the worker reported {reported / 1e3:.0f} µs of calls in a request that took "
                                         f"{wall_ns / 1e3:.0f} µs on the supervisor's clock (tampered timing)")
        self.reported += reported
        self.calls += len(e2e_ns)
        self.requests += 1
        if worker_cpu_ns is None:
            self.measured = False
        else:
            self.worker_cpu += worker_cpu_ns

    def check(self) -> None:
        """On the CPU: the reported times, over all blocks so far, must account for the
        worker's CPU time beyond the harness's share, spread over its cores."""
        if not (self.cpu and self.measured and self.calls):
            return
        harness = self.calls * self.per_call + self.requests * HARNESS_NS_PER_REQUEST
        unexplained = self.worker_cpu - harness
        if unexplained > self.reported * self.cores:
            raise RunFailure("REJECTED", f"the worker spent {self.worker_cpu / 1e3:.0f} µs of CPU time on "
                                         f"{self.calls} timed calls but reported {self.reported / 1e3:.0f} µs "
                                         f"(allowing {harness / 1e3:.0f} µs for the harness and {self.cores} "
                                         "core(s)): its times were tampered with")


@dataclass
class TimingPlan:
    budget_s: float
    min_samples: int
    max_samples: int


def summarize(device_ns: list[int], e2e_ns: list[int], method: str) -> Timing:
    us = [v / 1e3 for v in device_ns]
    s = bootstrap_median(us)
    e2e = bootstrap_median([v / 1e3 for v in e2e_ns]).median if e2e_ns else None
    return Timing(median_us=s.median, ci95_low_us=s.low, ci95_high_us=s.high, samples=s.n, method=method,
                  e2e_median_us=e2e, mean_us=sum(us) / len(us), min_us=min(us))


def measure_workload(supervisor: Supervisor, worker: WorkerProcess, session: WorkloadSession,
                     result: WorkloadResult, plan: TimingPlan) -> None:
    n_sets = len(session.sets)
    names = session.input_names
    problem = supervisor.problem
    tol = problem.spec.tolerance_for(session.workload.dtype)
    timer = supervisor.timer
    assert timer is not None
    reference = problem.reference

    def call_reference(i: int) -> Any:
        with torch.no_grad():
            return reference(**{name: session.sets[i % n_sets][name] for name in names})

    def refresh(round_no: int) -> None:
        from gpuarena.harness.supervisor import poison

        for k in range(n_sets):
            session.fill(k, session.make("timing", round_no, k))
            poison(session.dests[k])  # a call that writes nothing leaves NaN, not an old output
        session.sync()

    # warm-up: compilation, autotuning and allocator growth stay out of the samples
    refresh(0)
    timer.run_block(call_reference, WARMUP_CALLS)
    reply = worker.request({"op": "time", "n": 0, "warmup": max(WARMUP_CALLS, n_sets)}, supervisor.deadline,
                           f"warming up on {session.workload.name}")
    _raise_on_failure(reply)

    ref_dev: list[int] = []
    ref_e2e: list[int] = []
    sol_dev: list[int] = []
    sol_e2e: list[int] = []
    sol_method = timer.method
    on_cpu = session.device.type == "cpu"
    budget = TimeBudget(cpu=on_cpu, cores=_cores(), harness_ns=harness_cost_ns(supervisor, session) if on_cpu else 0)
    started = time.monotonic()
    round_no = 0
    while True:
        round_no += 1
        refresh(round_no)
        solution_first = round_no % 2 == 0
        for who in (("sol", "ref") if solution_first else ("ref", "sol")):
            if who == "ref":
                block = timer.run_block(call_reference, n_sets)
                ref_dev += block.device_ns
                ref_e2e += block.e2e_ns
            else:
                reply = worker.request({"op": "time", "n": n_sets}, supervisor.deadline,
                                       f"timing {session.workload.name}")
                _raise_on_failure(reply)
                dev, e2e = _samples(reply, n_sets)
                budget.add(e2e, worker.last_wall_ns, worker.last_cpu_ns)
                sol_dev += dev
                sol_e2e += e2e
                sol_method = str(reply.get("method", sol_method))
        session.sync()
        for k in range(n_sets):
            changed = session.modified_input(k)
            if changed:
                raise RunFailure("REJECTED", f"solve() modified its input {changed} during timing")
        # which calls are checked is decided now, after the block: every call had to be right
        for i in sorted(supervisor.rng.sample(range(n_sets), k=min(CHECKED_PER_BLOCK, n_sets))):
            expected = session.reference(session.private[i])
            for name, out, ref in zip(problem.spec.outputs, session.dests[i], expected):
                verdict = compare(name, out, ref, tol)
                if not verdict.ok:
                    raise RunFailure(verdict.status, f"a timed call returned wrong values: {verdict.reason}")
        elapsed = time.monotonic() - started
        if len(sol_dev) >= plan.max_samples:
            break
        if elapsed >= plan.budget_s and len(sol_dev) >= plan.min_samples:
            break
        if converged(sol_dev, plan.min_samples) and converged(ref_dev, plan.min_samples):
            break
        if time.monotonic() > supervisor.deadline:
            raise RunFailure("TIMEOUT", f"the time limit ran out while timing {session.workload.name}")

    budget.check()  # over all blocks: cold caches and page faults of one block even out
    result.time = summarize(sol_dev, sol_e2e, sol_method)
    result.reference_time = summarize(ref_dev, ref_e2e, timer.method)
    ratio, low, high = bootstrap_ratio(ref_dev, sol_dev)
    result.speedup, result.speedup_ci95 = ratio, (low, high)
    _speed_of_light(supervisor, session, result)


def _cores() -> int:
    """How many cores the worker can run on at most: those this process may use (the
    worker inherits the set; it can narrow it, not widen it beyond the cpuset)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _samples(reply: dict[str, Any], n: int) -> tuple[list[int], list[int]]:
    """Raw samples from the worker: exactly n non-negative integers each, or the run is rejected."""
    dev, e2e = reply.get("device_ns"), reply.get("e2e_ns")
    ok = all(isinstance(s, list) and len(s) == n and all(type(v) is int and v >= 0 for v in s) for s in (dev, e2e))
    if not ok:
        raise RunFailure("REJECTED", "the worker returned malformed timing samples")
    if any(d > e for d, e in zip(dev, e2e)):
        raise RunFailure("REJECTED", "device time exceeds the wall-clock time around the same call")
    if min(dev) <= 0:
        raise RunFailure("REJECTED", "a timed call did no measurable work on the device (a cached result, "
                                     "work done elsewhere, or a tampered clock)")
    return dev, e2e


def _raise_on_failure(reply: dict[str, Any]) -> None:
    if reply.get("op") == "failure":
        raise RunFailure(reply.get("status", "RUNTIME_ERROR"), reply.get("reason", ""), reply.get("traceback", ""))


def _speed_of_light(supervisor: Supervisor, session: WorkloadSession, result: WorkloadResult) -> None:
    """Achieved rates against measured peaks; a time under the physical floor is impossible."""
    moved, flops = supervisor.problem.spec.cost(session.workload)
    env = supervisor.peaks
    sol = SpeedOfLight(bytes=moved, flops=flops)
    seconds = result.time.median_us * 1e-6 if result.time else None
    if seconds and moved:
        sol.bandwidth_gbs = moved / seconds / 1e9
    if seconds and flops:
        sol.tflops = flops / seconds / 1e12
    if env and seconds:
        if sol.bandwidth_gbs is not None:
            sol.bandwidth_fraction = sol.bandwidth_gbs / env["bandwidth_gbs"]
        if sol.tflops is not None:
            sol.compute_fraction = sol.tflops * 1e12 / peaks.peak_flops(env, session.workload.torch_dtype)
        floor = peaks.floor_seconds(env, moved, flops)
        if floor is not None:
            sol.floor_us = floor * 1e6
            if seconds < peaks.FLOOR_MARGIN * floor:
                result.speed_of_light = sol
                raise RunFailure("REJECTED", f"impossible time: {seconds * 1e6:.2f} µs is below the physical floor "
                                             f"of {floor * 1e6:.2f} µs for this workload on this device")
    if moved or flops:
        result.speed_of_light = sol
