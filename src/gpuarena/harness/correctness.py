"""The correctness phase of one workload: trials on fresh inputs, each call's outputs compared
with the reference's (or judged by the problem's checker), its inputs checked untouched, and
both sides' errors against a float64 computation (precision.py)."""

from __future__ import annotations

from typing import Any

import torch

from gpuarena.contracts import messages
from gpuarena.contracts.records import Status, WorkloadResult
from gpuarena.harness import precision
from gpuarena.harness.bitwise import equal as bitwise_equal
from gpuarena.harness.compare import compare, judged
from gpuarena.harness.failure import RunFailure, worker_failure
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.run_context import RunContext
from gpuarena.harness.session import WorkloadSession, poison

TIMED_TRIALS = 1
"""Correctness trials of a workload that is timed next. Each of its timed rounds (at least
bounds.MIN_REQUESTS; four or more where the device audit samples them) refills every input set
with fresh data and checks a call chosen only once the block has run (measure.check_outputs),
which is what further trials would check, on more inputs. The first trial stays: a wrong
solution fails before any timing, with the trial's error figures."""


SHARED_BY = 4
"""A run's correctness-only workloads share `trials` x SHARED_BY draws, each of them at least one
and at most `trials` (trials_for). The further trials of a workload look for answers wrong on
some draws only (a race, a read of memory never written); a problem of many such workloads makes
many draws already, each of its own shape and data, so a workload needs fewer of its own: GPU
MODE's eigh_py has 39 tests and 13 benchmarks, and three trials each (batched eigh calls, their
references and the task's float64 checker) took 152.9 s in test mode on a 2-core CPU (52.6 s
shared), where GPU MODE's own test checks each test once. Up to SHARED_BY such workloads keep
`trials` each. In test mode every workload of the run is one: a bundled problem's CPU workloads
keep three trials, GPU MODE's vectoradd (five tests, five benchmarks) gets two; ranked, its five
tests keep three and each benchmark its one and its checked rounds."""


def trials_for(trials: int, timed: bool, untimed: int = 1) -> int:
    """The correctness trials a workload gets: TIMED_TRIALS where its timed rounds check the
    rest; else its share of the draws that the run's `untimed` correctness-only workloads share
    (SHARED_BY), at least one, at most `trials`."""
    if timed:
        return min(trials, TIMED_TRIALS)
    return max(1, min(trials, -(-trials * SHARED_BY // max(untimed, 1))))


def check_correctness(
    run: RunContext,
    trials: int,
    worker: WorkerProcess,
    session: WorkloadSession,
    result: WorkloadResult,
    first: dict[str, Any],
    first_ref: tuple[torch.Tensor, ...],
    timed: bool = False,
    untimed: int = 1,
) -> None:
    """`trials` calls on fresh inputs (the first trial's given), each judged in the supervisor;
    the first wrong one ends the workload with its verdict (RunFailure). A workload `timed` next,
    or one of the run's `untimed` correctness-only workloads, gets `trials_for` them."""
    trials = trials_for(trials, timed, untimed)
    tol = run.problem.spec.tolerance_for(session.workload.dtype)
    worst = {"abs": 0.0, "rel": 0.0, "l2": 0.0}
    for trial in range(trials):
        inputs, ref = (first, first_ref) if trial == 0 else (None, None)
        if inputs is None:
            inputs = session.make("trial", trial)
            ref = session.reference(inputs, session.call_seed("trial", trial))
        assert ref is not None  # given with the first trial's inputs, computed for the others
        session.fill(0, inputs, "trial", trial)
        poison(session.dests[0])
        session.sync()
        reply = worker.request(
            messages.Call(index=0, seed=session.call_seed("trial", trial)),
            run.deadline,
            f"calling solve() on {session.workload.name}, trial {trial + 1}",
        )
        result.trials = trial + 1
        if isinstance(reply, messages.Failure):
            raise worker_failure(reply)
        session.sync()
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor) and not bitwise_equal(session.sets[0][name], value):
                raise RunFailure(Status.REJECTED, f"solve() modified its input {name}")
        checker = run.problem.checker
        if checker is not None:  # the problem's own judgement, for answers that are not unique
            verdict = judged(checker, run.problem.spec.outputs, session.dests[0], ref, inputs)
            if not verdict.ok:
                raise RunFailure(verdict.status, f"trial {trial + 1}: {verdict.reason}")
            continue
        for name, out, expected in zip(run.problem.spec.outputs, session.dests[0], ref):
            verdict = compare(name, out, expected, tol)
            if verdict.max_abs_error is not None:
                # compare gives the three figures together
                assert verdict.max_rel_error is not None and verdict.l2_rel_error is not None
                worst["abs"] = max(worst["abs"], verdict.max_abs_error)
                worst["rel"] = max(worst["rel"], verdict.max_rel_error)
                worst["l2"] = max(worst["l2"], verdict.l2_rel_error)
                result.max_abs_error, result.max_rel_error, result.l2_rel_error = (
                    worst["abs"],
                    worst["rel"],
                    worst["l2"],
                )
            if not verdict.ok:
                raise RunFailure(verdict.status, f"trial {trial + 1}: {verdict.reason}")
        _precision(run, session, result, inputs, ref, trial)


FLOAT64_LEAST = 2 << 30
"""The float64 computation may always take this much (bytes of its widened inputs and
outputs); past it, what the device's input budget gives large sets (its `room`)."""


def _precision(
    run: RunContext,
    session: WorkloadSession,
    result: WorkloadResult,
    inputs: dict[str, Any],
    ref: tuple[torch.Tensor, ...],
    trial: int,
) -> None:
    """Both sides' errors against the reference in float64 (the worst over trials), and the
    faithful-math rule where the problem asks for it (harness/precision.py)."""
    problem = run.problem
    if not session.workload.torch_dtype.is_floating_point or result.float64_skipped:
        return
    wide = precision.float64_bytes(inputs, ref)
    limit = max(FLOAT64_LEAST, run.backend.input_budget(run.device).room)
    if wide > limit:  # KernelBench's 6.4 GB softmax: 26 GB widened, before the reference's own temporaries
        result.float64_skipped = (
            f"too large for a float64 computation here: {wide / 2**30:.1f} GiB widened, {limit / 2**30:.1f} GiB allowed"
        )
        return
    if problem.spec.checker is not None:  # a valid answer need not be close to one computation
        result.float64_skipped = "judged by the problem's own checker"
        return
    exact = precision.float64_reference(problem.reference, inputs)
    if isinstance(exact, str):
        result.float64_skipped = exact
        return
    reference_error = precision.worst_error(ref, exact)
    # an output bit for bit the reference's has its error (the float64 passes once, not twice)
    same = all(torch.equal(out, expected) for out, expected in zip(session.dests[0], ref))
    solution_error = reference_error if same else precision.worst_error(session.dests[0], exact)
    if solution_error is None or reference_error is None:
        return
    result.error_vs_float64 = max(result.error_vs_float64 or 0.0, solution_error)
    result.reference_error_vs_float64 = max(result.reference_error_vs_float64 or 0.0, reference_error)
    if problem.spec.faithful(session.workload.dtype):
        why = precision.unfaithful(solution_error, reference_error)
        if why:
            raise RunFailure(Status.WRONG_VALUES, f"trial {trial + 1}: lower precision than asked: {why}")
