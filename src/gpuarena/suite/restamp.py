"""A suite result read with the problems as they are now (`gpuarena suite restamp`): their
weights, and their time over the workloads they now run on the result's device.

A problem's time is the weighted geometric mean of its workloads' medians (run.problem_time),
and the medians are kept (`ProblemTime.workloads`): so when the weights change (`gpuarena dataset
weigh`: a workload weighs the model time it stands for) or a workload stops running on a device
(the CPU-sized `small` on a GPU, issue 48), or a merge joined its name with another model's for
the same shape, the time follows without timing anything again. The
95% interval is the run's, moved by the same factor as the time (the workloads' own intervals are
not kept): an approximation, said in the result's command. A problem whose workloads on the
device were not all timed in the result is left out, with the reason; nothing is dropped silently."""

from __future__ import annotations

from gpuarena.harness.stats import weighted_geomean
from gpuarena.problems.loader import Problem
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.runs import run_times

RESTAMPED = (
    "restamped with the problems' weights and workloads of today (gpuarena suite restamp: "
    "the times from the kept medians, each interval moved by its time's factor)"
)
"""What a restamped result's command says once, however often it is restamped again."""


def restamped(result: SuiteResult, problems: dict[str, Problem]) -> SuiteResult:
    """The result with each problem's weights and time as `problems` (by id) now give them."""
    target = "cpu" if result.device == "cpu" else "cuda"
    kept: list[ProblemTime] = []
    left_out = dict(result.left_out)
    for p in result.problems:
        problem = problems.get(p.problem)
        if problem is None:
            left_out[p.problem] = "not among the problems it was restamped with"
            continue
        spec = problem.spec
        now = p.model_copy(
            update={
                "level": spec.level,
                "weight": spec.weight,
                "level_weight": spec.level_weight,
                "model_weights": dict(spec.model_weights),
                "tags": list(spec.tags),
            }
        )
        if p.time_us is None:
            kept.append(now)
            continue
        runs_on = [w for w in spec.workloads if target in w.devices]
        medians = {w.name: _median(p.workloads, w.name) for w in runs_on}
        missing = sorted(name for name, median in medians.items() if median is None)
        if missing or not runs_on:
            left_out[p.problem] = (
                f"its workloads on {target} now ({', '.join(missing) or 'none'}) were not all timed in this result "
                f"(timed: {', '.join(sorted(p.workloads))}): time it again"
            )
            continue
        timed = {name: median for name, median in medians.items() if median is not None}
        time_us = weighted_geomean([timed[w.name] for w in runs_on], [w.weight for w in runs_on])
        scale = time_us / p.time_us
        kept.append(
            now.model_copy(
                update={
                    "time_us": time_us,
                    "low_us": p.low_us * scale if p.low_us is not None else None,
                    "high_us": p.high_us * scale if p.high_us is not None else None,
                    "workloads": timed,
                    "runs_us": [r * scale for r in run_times(p)],
                }
            )
        )
    return result.model_copy(
        update={
            "problems": kept,
            "left_out": dict(sorted(left_out.items())),
            "command": result.command if RESTAMPED in result.command else f"{result.command} ; {RESTAMPED}",
        }
    )


def _median(workloads: dict[str, float], name: str) -> float | None:
    """The workload's median as timed: under its name, or, for a name `dataset merge` joined
    (`llama-prefill.mistral-prefill`: one shape two models share), under any of its parts."""
    if name in workloads:
        return workloads[name]
    return next((workloads[part] for part in name.split(".") if part in workloads), None)
