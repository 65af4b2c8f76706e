"""The harness's single entry point: one solution judged on one problem on one device, by the
supervisor (supervisor.py) or, in profile mode, under Nsight Compute (profile/run.py). The top
floor of the harness: nothing in it imports this module."""

from __future__ import annotations

import torch

from gpuarena.contracts.records import Evaluation, Status
from gpuarena.harness.device.backend import backend_for
from gpuarena.harness.launch.ahead import DeviceAhead
from gpuarena.harness.launch.started import StartedWorker
from gpuarena.harness.options import RunOptions
from gpuarena.harness.problem_pending import check_first, pending
from gpuarena.harness.profile.run import profile_evaluation
from gpuarena.harness.supervisor import Progress, Supervisor
from gpuarena.harness.warm import Warm
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import unmet_requirements
from gpuarena.solutions.model import Solution

__all__ = ["Progress", "RunOptions", "evaluate"]


def evaluate(
    problem: Problem,
    solution: Solution,
    options: RunOptions | None = None,
    progress: Progress | None = None,
    worker: StartedWorker | None = None,
    warm: Warm | None = None,
    ahead: DeviceAhead | None = None,
) -> Evaluation:
    """Judge one solution on one problem on one device: the harness's single entry point.
    worker: one set up ahead (StartedWorker), which the run uses and closes; warm: what a
    long-lived caller keeps between jobs (harness/warm.py); ahead: the device's sampler and
    reading started before torch was imported (harness/launch/ahead.py; the caller closes it). Profile mode goes to
    harness/profile/run.py, which starts workers of its own."""
    options = options or RunOptions()
    backend_for(torch.device(options.device))  # another vendor's GPU is refused here, with the gap named
    refused = _refused_before_judging(problem, solution, options, progress)
    if refused is not None:  # no verdict on the solution: the problem cannot be judged here
        if worker is not None:
            worker.close()
        return refused
    if options.mode == "profile":
        if worker is not None:
            worker.close()
        return profile_evaluation(problem, solution, options.device, options.workloads, options.timeout_s, progress)
    return Supervisor(problem, solution, options, progress, worker, warm, ahead).run()


def _refused_before_judging(
    problem: Problem, solution: Solution, options: RunOptions, progress: Progress | None
) -> Evaluation | None:
    """The problem's own conditions, taken by every path into the judge (issue 49): packages it
    requires that this machine lacks (ProblemSpec.requires), and a problem written where it could
    not be checked that fails its check here on its first run (problem_pending.py)."""
    missing = problem.spec.missing_packages()
    if missing:
        return solution.record(
            problem.id,
            options.device,
            options.mode,
            status=Status.ERROR,
            reason=unmet_requirements(problem.id, missing),
        )
    if progress is not None and pending(problem, options.device.split(":", 1)[0]):
        progress(f"checking {problem.id} on {options.device} first: it was written where it could not be")
    return check_first(problem, solution, options.device, options.mode)
