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
where all work is CPU time, they must cover the worker's CPU time, spread over at most the
cores it may use, less the harness's own share. That share is measured, not guessed: on the
CPU the reference's block runs through the worker's own timing code in the supervisor
(`ReferenceTwin`), in the same round and on the same buffers, and the supervisor's CPU
time over it less the calls' windows is the harness's cost there.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import torch

from gpuarena.harness import device_audit, peaks
from gpuarena.harness.compare import compare
from gpuarena.harness.process import RunFailure, WorkerProcess, worker_failure
from gpuarena.harness.records import DeviceAudit, SpeedOfLight, Timing, WorkloadResult
from gpuarena.harness.sandbox import children_of
from gpuarena.harness.stats import bootstrap_median, bootstrap_ratio, converged
from gpuarena.harness.worker import CallFailure, Worker

if TYPE_CHECKING:
    from gpuarena.harness.supervisor import Supervisor, WorkloadSession

WARMUP_CALLS = 3
CHECKED_PER_BLOCK = 1
"""Timed calls whose outputs are compared in each block, chosen after it has run."""

HARNESS_MARGIN = 1.3
"""The worker's own CPU work in a `time` request (outside the calls' windows: receiving the
request, poisoning destinations, copying outputs out, the checks on them, the loop, the
reply) is allowed this multiple of what the same harness code costs when the supervisor
runs it with a solve() that does nothing,"""
HARNESS_NS_PER_CALL = 5_000
"""plus this much per call (allocator and cache effects the no-op does not show)."""


class ReferenceTwin:
    """The reference timed through the worker's own `time` code, in the supervisor (CPU).

    Run this way, the reference's block does all the harness work a solution's block does
    in the worker (poisoning, copying outputs out, checks, the loop), in the same
    conditions (the same shared input sets, caches as the other side left them), so the
    supervisor's CPU time over the block less the calls' windows is a faithful measure of
    the harness's own cost: the allowance against which the worker's CPU time is judged.
    The reference is trusted; its outputs go to buffers of the supervisor's own, never to
    the shared destinations the solution's outputs are checked in."""

    def __init__(self, supervisor: Supervisor, session: WorkloadSession, solve: Any = None,
                 convention: str = "return"):
        self.worker = _TrustedWorker(None)  # type: ignore[arg-type]  # no connection: used in-process
        w = self.worker
        w.timer = supervisor.timer
        w.device = session.device
        w.convention = convention  # the reference: "return", whatever the solution's convention
        w.input_names = session.input_names
        w.output_names = supervisor.problem.spec.outputs
        w.sets = session.sets
        w.dests = [[torch.empty_like(d) for d in dests] for dests in session.dests]
        w.children = children_of(os.getpid())
        w.solve = solve or supervisor.problem.reference

    @classmethod
    def no_op(cls, supervisor: Supervisor, session: WorkloadSession, convention: str | None = None) -> ReferenceTwin:
        """The harness alone: a solve() that does nothing (destination convention) or returns
        ready outputs of the right shapes, through the worker's own `time` code. What the GPU
        shows for it is the harness's share of a solution's request (poisoning, copying
        outputs out), for the device audit to take off. `convention`: the problem's unless
        given (the reference always returns its outputs)."""
        convention = convention or supervisor.problem.spec.convention
        outs = [torch.empty_like(d) for d in session.dests[0]]

        def solve(*_: Any, **__: Any) -> Any:
            if convention == "destination":
                return None
            return outs[0] if len(outs) == 1 else tuple(outs)

        return cls(supervisor, session, solve=solve, convention=convention)

    def block(self, n: int, evict: bool = True) -> tuple[list[int], list[int], int]:
        """n timed calls: device samples, end-to-end samples, the harness's CPU time."""
        started = time.thread_time_ns()
        with torch.no_grad():  # entered once, outside the calls' windows
            reply = self.worker.time({"n": n, "evict": evict})
        spent = time.thread_time_ns() - started
        return reply["device_ns"], reply["e2e_ns"], max(spent - sum(reply["e2e_ns"]), 0)


class _TrustedWorker(Worker):
    def _outputs(self, k: int, result: Any) -> list[torch.Tensor]:
        try:  # the same checks, for the same cost; a reference may return a view of an input
            return super()._outputs(k, result)
        except CallFailure:
            return list(result) if isinstance(result, (tuple, list)) else [result]


def _request_roundtrip_ns(calls: int) -> int:
    """CPU time to pass one `time` request and its reply of `calls` samples through the
    harness protocol (both ends, in this thread: an over-estimate of the worker's share)."""
    import socket
    from multiprocessing.connection import Connection

    from gpuarena.harness import protocol

    a, b = socket.socketpair()
    ours, theirs = Connection(a.detach()), Connection(b.detach())
    reply = {"op": "time", "device_ns": [123_456_789] * calls, "e2e_ns": [123_456_789] * calls,
             "method": "cpu-perf-counter", "nonce": "0" * 16}
    best = None
    try:
        for _ in range(5):
            started = time.thread_time_ns()
            protocol.send_request(ours, {"op": "time", "n": calls, "nonce": "0" * 16})
            protocol.receive_request(theirs)
            protocol.send_reply(theirs, reply)
            protocol.receive_reply(ours, 1.0)
            spent = time.thread_time_ns() - started
            best = spent if best is None else min(best, spent)
    finally:
        ours.close()
        theirs.close()
    return best or 0


MIN_REQUESTS = 3
"""Requests the bound needs before it judges (a median of fewer is one outlier away)."""


class TimeBudget:
    """The supervisor-side bound on the worker's reported times (see the module docstring).

    Per `time` request the supervisor knows its own wall clock around it and the worker's
    CPU time over it (the kernel's account). Reported times may never sum to more than the
    wall clock. On the CPU, the worker's CPU time beyond the harness's allowance is the
    solution's work, which the reported times (spread over at most `cores` cores) must
    cover. The allowance comes from the reference's block of the same round, run through
    the same harness code in the supervisor (`ReferenceTwin`). A request can be slowed by
    the machine (page faults, another process), never sped up, so the bound is judged on
    the median request, robust to such outliers."""

    def __init__(self, cpu: bool, cores: int, roundtrip_ns: int = 0):
        self.cpu, self.cores = cpu, max(1, cores)
        self.roundtrip_ns = roundtrip_ns
        self.harness_ns: int | None = None
        """The harness's CPU time in the latest reference block (set by the caller)."""
        self.unexplained: list[float] = []
        """Per request: CPU time the reported times and the allowance leave unexplained."""
        self.allowances: list[float] = []
        self.worker_cpu = 0
        self.reported = 0
        self.calls = 0
        self.measured = True

    def allowance_ns(self, calls: int) -> float:
        assert self.harness_ns is not None
        return HARNESS_MARGIN * self.harness_ns + self.roundtrip_ns + HARNESS_NS_PER_CALL * calls

    def add(self, e2e_ns: list[int], wall_ns: int, worker_cpu_ns: int | None) -> None:
        reported = sum(e2e_ns)
        if reported > wall_ns:
            raise RunFailure("REJECTED", f"the worker reported {reported / 1e3:.0f} µs of calls in a request that took "
                                         f"{wall_ns / 1e3:.0f} µs on the supervisor's clock (tampered timing)")
        self.reported += reported
        self.calls += len(e2e_ns)
        if worker_cpu_ns is None or self.harness_ns is None:
            self.measured = False
            return
        self.worker_cpu += worker_cpu_ns
        allowance = self.allowance_ns(len(e2e_ns))
        self.allowances.append(allowance)
        self.unexplained.append(worker_cpu_ns - allowance - reported * self.cores)

    def _median_unexplained(self) -> float | None:
        if not (self.cpu and self.measured and len(self.unexplained) >= MIN_REQUESTS):
            return None
        return sorted(self.unexplained)[len(self.unexplained) // 2]

    def holds(self) -> bool:
        median = self._median_unexplained()
        return median is None or median <= 0

    def restart(self) -> None:
        """Forget the requests so far: the next check judges only the requests after this."""
        self.unexplained, self.allowances = [], []
        self.worker_cpu = self.reported = self.calls = 0

    def check(self) -> None:
        """On the CPU: in the median request, the reported times must account for the
        worker's CPU time beyond the harness's allowance."""
        median = self._median_unexplained()
        if median is not None and median > 0:
            middle = len(self.unexplained) // 2
            per_call = self.calls / len(self.unexplained)
            allowance = sorted(self.allowances)[middle] / per_call
            raise RunFailure(
                "REJECTED",
                f"the worker's CPU time is not explained by the times it reported: in the median request it spent "
                f"{median / per_call / 1e3:.0f} µs per call more than its reported times (over {self.cores} core(s)) "
                f"and the harness's own share ({allowance / 1e3:.0f} µs per call, measured on the reference); over "
                f"{self.calls} timed calls it reported {self.reported / 1e3:.0f} µs and spent "
                f"{self.worker_cpu / 1e3:.0f} µs of CPU time (judged again on fresh rounds, with the same "
                "outcome): its times were tampered with")


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
    timer = supervisor.timer
    assert timer is not None
    call_reference = reference_call(session)

    def refresh(round_no: int) -> None:
        refresh_sets(session, round_no, "timing")

    # warm-up: compilation, autotuning and allocator growth stay out of the samples
    refresh(0)
    timer.run_block(call_reference, WARMUP_CALLS)
    reply = worker.request({"op": "time", "n": 0, "warmup": max(WARMUP_CALLS, n_sets)}, supervisor.deadline,
                           f"warming up on {session.workload.name}")
    raise_on_failure(reply)

    ref_dev: list[int] = []
    ref_e2e: list[int] = []
    sol_dev: list[int] = []
    sol_e2e: list[int] = []
    sol_method = timer.method
    on_cpu = session.device.type == "cpu"
    budget = TimeBudget(cpu=on_cpu, cores=_cores(), roundtrip_ns=_request_roundtrip_ns(n_sets) if on_cpu else 0)
    twin = ReferenceTwin(supervisor, session) if on_cpu else None
    started = time.monotonic()

    def one_round(round_no: int) -> None:
        nonlocal sol_method
        refresh(round_no)
        solution_first = round_no % 2 == 0
        for who in (("sol", "ref") if solution_first else ("ref", "sol")):
            if who == "ref":
                if twin is not None:
                    dev, e2e, budget.harness_ns = twin.block(n_sets)
                else:
                    block = timer.run_block(call_reference, n_sets)
                    dev, e2e = block.device_ns, block.e2e_ns
                ref_dev.extend(dev)
                ref_e2e.extend(e2e)
            else:
                reply = worker.request({"op": "time", "n": n_sets}, supervisor.deadline,
                                       f"timing {session.workload.name}")
                raise_on_failure(reply)
                dev, e2e = _samples(reply, n_sets, host_timed=on_cpu)
                budget.add(e2e, worker.last_wall_ns, worker.last_cpu_ns)
                sol_dev.extend(dev)
                sol_e2e.extend(e2e)
                sol_method = str(reply.get("method", sol_method))
        check_block()

    def check_block() -> None:
        check_outputs(supervisor, session, f"timing {session.workload.name}")

    def audit_block() -> DeviceAudit:
        """More requests of the solution's calls, without the L2 sweep, each while the GPU's
        own counters are read from outside the worker (device_audit.py). Each request gets
        fresh inputs and its outputs checked, as in the timed rounds, so the calls seen must
        do their work; the supervisor's own GPU work (refreshing inputs, checks) falls between
        the sampled segments. The harness alone and the trusted reference are sampled the same
        way first: the harness's share is taken off, and what the audit's conditions add to
        the reference is allowed to the solution."""
        sampler = supervisor.sampler
        audit = DeviceAudit(margin=device_audit.AUDIT_MARGIN, claimed_us=result.time.median_us if result.time else None)
        if sampler is None:
            audit.skipped = supervisor.sampler_missing
            return audit
        try:
            with sampler.sampling():
                # the audit cannot be switched off by keeping the GPU busy: wait for a quiet
                # GPU, and a GPU that never gets quiet ends the run (the service retries it)
                for _ in range(device_audit.QUIET_ATTEMPTS):
                    idle = sampler.idle()
                    if not device_audit.shared(idle):
                        break
                    time.sleep(device_audit.QUIET_WAIT_S)
                else:
                    raise RunFailure("REJECTED", f"the GPU stayed {idle.busy_ns / idle.span_ns:.0%} busy with work "
                                                 "that is not the harness's before the device audit (it needs the GPU "
                                                 "to itself: run the job again on a quiet GPU)")
                e2e_us = result.time.e2e_median_us if result.time and result.time.e2e_median_us else 1.0
                calls = min(device_audit.AUDIT_CALLS, max(1, int(device_audit.AUDIT_BLOCK_S * 1e6 / e2e_us)))
                requests = -(-calls // n_sets)
                evict = device_audit.AUDIT_EVICTS

                def sampled(twin: ReferenceTwin) -> float:  # busy ns of `requests` blocks of the twin
                    return sampler.segment(lambda: [twin.block(n_sets, evict=evict) for _ in range(requests)])[1].busy_ns

                # the harness alone, through the same code, on the same shapes, as many calls
                harness_ns, busy_ns = sampled(ReferenceTwin.no_op(supervisor, session)), 0.0
                # the trusted reference in the same conditions, less its own harness share (it
                # returns its outputs, whatever the solution's convention): what they add to a call
                reference_harness_ns = harness_ns if supervisor.problem.spec.convention == "return" else sampled(
                    ReferenceTwin.no_op(supervisor, session, convention="return"))
                reference_ns = sampled(ReferenceTwin(supervisor, session))
                audit.reference_observed_us_per_call = (max(reference_ns - reference_harness_ns, 0.0)
                                                        / (requests * n_sets) / 1e3)
                for j in range(requests):
                    refresh(round_no + 1 + j)  # ends with a device sync: none of it in a segment
                    # the very request a timed round sends: the solution cannot tell it is audited
                    # from the request (with AUDIT_EVICTS, not from the caches either)
                    request = {"op": "time", "n": n_sets} if evict else {"op": "time", "n": n_sets, "evict": False}
                    reply, window = sampler.segment(lambda: worker.request(
                        request, supervisor.deadline, f"timing {session.workload.name}"))
                    raise_on_failure(reply)
                    _samples(reply, n_sets)
                    check_block()
                    busy_ns += window.busy_ns
                    audit.calls += n_sets
        except device_audit.SamplerError as exc:
            audit.skipped = f"the PM sampler failed: {exc}"
            return audit
        audit.harness_us_per_call = harness_ns / audit.calls / 1e3
        audit.observed_us_per_call = max(busy_ns - harness_ns, 0.0) / audit.calls / 1e3
        audit.reference_claimed_us = result.reference_time.median_us if result.reference_time else None
        audit.inflation_us = device_audit.inflation(audit.reference_observed_us_per_call, audit.reference_claimed_us)
        if audit.claimed_us is not None and device_audit.understated(audit.claimed_us, audit.observed_us_per_call,
                                                                     audit.inflation_us):
            result.device_audit = audit
            allowance = f", less {audit.inflation_us:.2f} µs the audit adds to any call" if audit.inflation_us else ""
            raise RunFailure("REJECTED", f"the claimed device time ({audit.claimed_us:.2f} µs per call) is below what "
                                         f"the GPU's own counters saw from outside the worker "
                                         f"({audit.observed_us_per_call:.2f} µs per call over {audit.calls} calls"
                                         f"{allowance})")
        return audit

    round_no = 0
    while True:
        round_no += 1
        one_round(round_no)
        elapsed = time.monotonic() - started
        if len(sol_dev) >= plan.max_samples:
            break
        if elapsed >= plan.budget_s and len(sol_dev) >= plan.min_samples:
            break
        if converged(sol_dev, plan.min_samples) and converged(ref_dev, plan.min_samples):
            break

    # judged on the median request: cold caches and page faults of one block even out
    if not budget.holds():
        # a machine busy for a while (other runners, a database) can slow the worker's own
        # work for many requests in a row: judge once more on fresh rounds before rejecting.
        # A solution whose times are forged fails again; an honest one under a passing load
        # does not.
        budget.restart()
        for _ in range(max(MIN_REQUESTS + 2, round_no // 2)):
            round_no += 1
            one_round(round_no)
    budget.check()
    result.time = summarize(sol_dev, sol_e2e, sol_method)
    result.reference_time = summarize(ref_dev, ref_e2e, timer.method)
    if device_audit.applies(session.device):
        result.device_audit = audit_block()
    ratio, low, high = bootstrap_ratio(ref_dev, sol_dev)
    result.speedup, result.speedup_ci95 = ratio, (low, high)
    _speed_of_light(supervisor, session, result)


def reference_call(session: WorkloadSession) -> Callable[[int], Any]:
    """call(i): the trusted reference on input set i (of the session's rotating sets)."""
    names, n_sets, reference = session.input_names, len(session.sets), session.problem.reference

    def call(i: int) -> Any:
        with torch.no_grad():
            return reference(**{name: session.sets[i % n_sets][name] for name in names})

    return call


def refresh_sets(session: WorkloadSession, round_no: int, purpose: str) -> None:
    """Fresh random inputs in every shared set (drawn from the run's seed, the purpose and
    the round) and NaN in every destination, outside any timed region."""
    from gpuarena.harness.supervisor import poison

    for k in range(len(session.sets)):
        session.fill(k, session.make(purpose, round_no, k))
        poison(session.dests[k])  # a call that writes nothing leaves NaN, not an old output
    session.sync()


def check_outputs(supervisor: Supervisor, session: WorkloadSession, doing: str) -> None:
    """After a block of the solution's calls: no input changed, and the outputs of calls
    chosen only now are right (every call had to be), within the run's time limit."""
    session.sync()
    for k in range(len(session.sets)):
        changed = session.modified_input(k)
        if changed:
            raise RunFailure("REJECTED", f"solve() modified its input {changed} during timing")
    tol = session.problem.spec.tolerance_for(session.workload.dtype)
    for i in sorted(supervisor.rng.sample(range(len(session.sets)), k=min(CHECKED_PER_BLOCK, len(session.sets)))):
        expected = session.reference(session.private[i])
        for name, out, ref in zip(session.problem.spec.outputs, session.dests[i], expected):
            verdict = compare(name, out, ref, tol)
            if not verdict.ok:
                raise RunFailure(verdict.status, f"a timed call returned wrong values: {verdict.reason}")
    if time.monotonic() > supervisor.deadline:
        raise RunFailure("TIMEOUT", f"the time limit ran out while {doing}")


def _cores() -> int:
    """How many cores the worker can run on at most: those this process may use (the
    worker inherits the set; it can narrow it, not widen it beyond the cpuset)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _samples(reply: dict[str, Any], n: int, host_timed: bool = False) -> tuple[list[int], list[int]]:
    """Raw samples from the worker: exactly n non-negative integers each, or the run is rejected.
    host_timed: the device is the host (CPU), where a call's device time *is* its end-to-end
    time: a device time that differs was forged (and only the end-to-end one is bounded by
    the worker's CPU time)."""
    dev, e2e = reply.get("device_ns"), reply.get("e2e_ns")
    ok = all(isinstance(s, list) and len(s) == n and all(type(v) is int and v >= 0 for v in s) for s in (dev, e2e))
    if not ok:
        raise RunFailure("REJECTED", "the worker returned malformed timing samples")
    if any(d > e for d, e in zip(dev, e2e)):
        raise RunFailure("REJECTED", "device time exceeds the wall-clock time around the same call")
    if host_timed and dev != e2e:
        raise RunFailure("REJECTED", "on the CPU a call's device time is its end-to-end time, and the worker "
                                     "reported them different (tampered timing)")
    if min(dev) <= 0:
        raise RunFailure("REJECTED", "a timed call did no measurable work on the device (a cached result, "
                                     "work done elsewhere, or a tampered clock)")
    return dev, e2e


def raise_on_failure(reply: dict[str, Any]) -> None:
    """A worker's failure reply as the run's verdict (checked: process.worker_failure)."""
    if reply.get("op") == "failure":
        raise worker_failure(reply)


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
