"""The timing phase of one workload: reference (A) and solution (B) in interleaved blocks.

Each round refreshes every input set with fresh random data (outside any timed region),
times one block of the reference in the supervisor and one block of the solution in the
worker (alternating which goes first), checks the output of a randomly chosen timed call
of the solution and that no input changed. It stops once it has the minimum sample count
and either both medians' 95% intervals are within ±1% or the budget is spent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from gpuarena.harness import peaks
from gpuarena.harness.compare import compare, fingerprint
from gpuarena.harness.process import RunFailure, WorkerProcess
from gpuarena.harness.records import SpeedOfLight, Timing, WorkloadResult
from gpuarena.harness.stats import bootstrap_median, bootstrap_ratio, converged

if TYPE_CHECKING:
    from gpuarena.harness.supervisor import Supervisor, WorkloadSession

WARMUP_CALLS = 3


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

    def refresh(round_no: int) -> list[dict[str, tuple[int, ...]]]:
        prints = []
        for k in range(n_sets):
            session.fill(k, session.make("timing", round_no, k))
            prints.append({n: fingerprint(v) for n, v in session.sets[k].items() if isinstance(v, torch.Tensor)})
        session.sync()
        return prints

    # warm-up: compilation, autotuning and allocator growth stay out of the samples
    refresh(0)
    timer.run_block(call_reference, WARMUP_CALLS)
    reply = worker.request({"op": "time", "n": 0, "warmup": WARMUP_CALLS}, supervisor.deadline,
                           f"warming up on {session.workload.name}")
    _raise_on_failure(reply)

    ref_dev: list[int] = []
    ref_e2e: list[int] = []
    sol_dev: list[int] = []
    sol_e2e: list[int] = []
    sol_method = timer.method
    started = time.monotonic()
    round_no = 0
    while True:
        round_no += 1
        prints = refresh(round_no)
        check = sorted(supervisor.rng.sample(range(n_sets), k=min(len(session.checks), n_sets)))
        for slot in session.checks:
            for t in slot:
                t.fill_(float("nan") if t.is_floating_point() else 0)
        session.sync()
        solution_first = round_no % 2 == 0
        for who in (("sol", "ref") if solution_first else ("ref", "sol")):
            if who == "ref":
                block = timer.run_block(call_reference, n_sets)
                ref_dev += block.device_ns
                ref_e2e += block.e2e_ns
            else:
                reply = worker.request({"op": "time", "n": n_sets, "check": check}, supervisor.deadline,
                                       f"timing {session.workload.name}")
                _raise_on_failure(reply)
                dev, e2e = _samples(reply, n_sets)
                sol_dev += dev
                sol_e2e += e2e
                sol_method = str(reply.get("method", sol_method))
        session.sync()
        for j, i in enumerate(check):
            expected = session.reference({n: session.sets[i][n] for n in names})
            for name, out, ref in zip(problem.spec.outputs, session.checks[j], expected):
                verdict = compare(name, out, ref, tol)
                if not verdict.ok:
                    raise RunFailure(verdict.status, f"a timed call returned wrong values: {verdict.reason}")
        for k in range(n_sets):
            now = {n: fingerprint(v) for n, v in session.sets[k].items() if isinstance(v, torch.Tensor)}
            changed = [n for n in now if now[n] != prints[k][n]]
            if changed:
                raise RunFailure("REJECTED", f"solve() modified its input {changed[0]} during timing")
        elapsed = time.monotonic() - started
        if len(sol_dev) >= plan.max_samples:
            break
        if elapsed >= plan.budget_s and len(sol_dev) >= plan.min_samples:
            break
        if converged(sol_dev, plan.min_samples) and converged(ref_dev, plan.min_samples):
            break
        if time.monotonic() > supervisor.deadline:
            raise RunFailure("TIMEOUT", f"the time limit ran out while timing {session.workload.name}")

    result.time = summarize(sol_dev, sol_e2e, sol_method)
    result.reference_time = summarize(ref_dev, ref_e2e, timer.method)
    ratio, low, high = bootstrap_ratio(ref_dev, sol_dev)
    result.speedup, result.speedup_ci95 = ratio, (low, high)
    _speed_of_light(supervisor, session, result)


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
