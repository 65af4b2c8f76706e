"""Run a framework's implementation of each problem on a device (benchmark mode, through the
warm evaluator: one process, workers started ahead) and keep each problem's time."""

from __future__ import annotations

import math
import platform
import shlex
import sys
from collections.abc import Callable

from gpuarena import __version__
from gpuarena.contracts.records import Evaluation
from gpuarena.harness.stats import weighted_geomean
from gpuarena.problems.loader import Problem, discover
from gpuarena.suite.frameworks import framework_solution, implements
from gpuarena.suite.model import ProblemTime, SuiteResult


def problem_time(problem: Problem, record: Evaluation) -> ProblemTime:
    """The problem's time from the record of its framework's implementation."""
    base = dict(
        problem=problem.id,
        level=problem.spec.level,
        weight=problem.spec.weight,
        level_weight=problem.spec.level_weight,
        model_weights=problem.spec.model_weights,
        tags=problem.spec.tags,
        status=record.status.value,
        reason=record.reason,
    )
    timed = [(w, w.time) for w in record.workloads if w.time is not None]
    if record.status.value != "PASSED" or not timed:
        return ProblemTime(**base)
    weights = [w.weight for w, _ in timed]
    time_us = weighted_geomean([t.median_us for _, t in timed], weights)
    return ProblemTime(
        **base,
        time_us=time_us,
        low_us=weighted_geomean([t.ci95_low_us for _, t in timed], weights),
        high_us=weighted_geomean([t.ci95_high_us for _, t in timed], weights),
        workloads={w.name: t.median_us for w, t in timed},
        runs_us=[time_us],
    )


def run_suite(
    problems: list[Problem],
    framework: str,
    device: str,
    budget_s: float = 1.0,
    progress: Callable[[str], None] = lambda text: None,
    checkpoint: Callable[[SuiteResult], None] = lambda result: None,
    time_limit_s: float | None = None,
) -> SuiteResult:
    """Time the framework's implementation of each problem on device; a problem with no
    workload for the device, or not in this framework, is left out (said in progress, and kept
    with the reason in the result's left_out). checkpoint gets the result so far
    after each problem (the CLI writes it, so a run stopped early keeps what it timed).
    time_limit_s caps each problem's whole run below its own benchmark limit: one problem a
    framework takes minutes to build (torch.compile unrolling a recurrence) is a TIMEOUT, and
    the suite goes on."""
    from gpuarena.harness.evaluator import Evaluator
    from gpuarena.harness.supervisor import RunOptions

    target = _target(device)
    times: list[ProblemTime] = []
    left_out = left_out_of(problems, framework, device)
    device_name = ""
    with Evaluator(device) as evaluator:
        for i, problem in enumerate(problems, 1):
            if problem.id in left_out:
                progress(f"[{i}/{len(problems)}] {problem.id}: {left_out[problem.id]}, left out")
                continue
            workloads = [w.name for w in problem.spec.workloads if target in w.devices]
            options = RunOptions(
                device=device,
                mode="benchmark",
                budget_s=budget_s,
                workloads=workloads,
                timeout_s=min(problem.spec.time_limit_for("benchmark"), time_limit_s or math.inf),
                kernel_duration=False,
                device_audit=False,
            )  # the dataset's own code: nothing to audit
            record = evaluator.judge(problem, framework_solution(problem, framework), options)
            if record.environment is not None and not device_name:
                device_name = record.environment.device_name
            times.append(problem_time(problem, record))
            if record.status == "TIMEOUT" and options.timeout_s < problem.spec.time_limit_for("benchmark"):
                said = f"{times[-1].reason} (the suite's --time-limit, {options.timeout_s:g} s)"
                times[-1] = times[-1].model_copy(update={"reason": said})
            checkpoint(result_of(framework, device, device_name, times, left_out))
            shown = f"{times[-1].time_us:.1f} µs" if times[-1].time_us is not None else times[-1].status
            progress(f"[{i}/{len(problems)}] {problem.id}: {shown}")
    return result_of(framework, device, device_name, times, left_out)


def _target(device: str) -> str:
    return "cpu" if device == "cpu" else "cuda"


def left_out_of(problems: list[Problem], framework: str, device: str) -> dict[str, str]:
    """The chosen problems the framework does not run on the device, and why: the result keeps
    them (SuiteResult.left_out), so a comparison can say why they are missing."""
    target, why = _target(device), {}
    for problem in problems:
        if not any(target in w.devices for w in problem.spec.workloads):
            why[problem.id] = f"no {target} workload"
        elif not implements(problem, framework):
            why[problem.id] = (
                f"its reference is written in {problem.spec.provenance.framework}, no {framework} implementation"
            )
    return why


def result_of(
    framework: str, device: str, device_name: str, times: list[ProblemTime], left_out: dict[str, str] | None = None
) -> SuiteResult:
    """The suite result of these problem times, with this process's versions and command."""
    import torch

    environment = {"python": platform.python_version(), "torch": torch.__version__, "gpuarena": __version__}
    try:
        import triton

        environment["triton"] = triton.__version__
    except ImportError:
        pass
    return SuiteResult(
        framework=framework,
        device=device,
        device_name=device_name or device,
        environment=environment,
        command=" ".join(shlex.quote(a) for a in ["gpuarena", *sys.argv[1:]]),
        problems=list(times),
        left_out=dict(left_out or {}),
    )


def all_problems(roots: list) -> list[Problem]:
    """The bundled problems, or those under the given roots."""
    if not roots:
        return discover()
    found: list[Problem] = []
    for root in roots:
        found.extend(discover(root))
    return found
