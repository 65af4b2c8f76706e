"""Several runs of the suite as one result (and the parts of one run made in several calls:
`join_parts`): the whole suite run again (`suite run --runs N`, or
`suite merge` of runs made apart), so a score's interval can span the run-to-run spread and not
only the noise within one run.

Per problem: time_us is the geometric mean of the runs' times, low_us and high_us the lowest and
highest end of the runs' 95% intervals (the interval spans every run), runs_us each run's time.
A problem that did not pass in every run is not timed: its status and reason are the first
failing run's, so a flaky implementation is named, not averaged away."""

from __future__ import annotations

import math

from gpuarena.errors import GpuarenaError
from gpuarena.suite.model import ProblemTime, SuiteResult


def run_times(p: ProblemTime) -> list[float]:
    """The problem's time in each run (a file from before runs were kept: its one time)."""
    if p.runs_us:
        return list(p.runs_us)
    return [p.time_us] if p.time_us is not None else []


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def merge_problem(times: list[ProblemTime], total: int) -> ProblemTime:
    """One problem over the runs that ran it (total: how many runs the merged result counts)."""
    first = times[0]
    failed = next(((k, t) for k, t in enumerate(times, 1) if t.time_us is None), None)
    if failed is not None:
        k, t = failed
        return t.model_copy(update={"reason": f"run {k} of {total}: {t.status} {t.reason}".strip(), "runs_us": []})
    runs = [r for t in times for r in run_times(t)]
    lows = [t.low_us for t in times if t.low_us is not None]
    highs = [t.high_us for t in times if t.high_us is not None]
    names = set.intersection(*(set(t.workloads) for t in times)) if times else set()
    return first.model_copy(
        update={
            "time_us": _geomean(runs),
            "low_us": min(lows) if lows else None,
            "high_us": max(highs) if highs else None,
            "workloads": {w: _geomean([t.workloads[w] for t in times]) for w in first.workloads if w in names},
            "runs_us": runs,
        }
    )


def merge_runs(results: list[SuiteResult]) -> SuiteResult:
    """The runs as one result, the problems in the first run's order (a problem only a later run
    has comes after). The runs must be of one framework on one device: else they are not runs of
    one thing."""
    if not results:
        raise GpuarenaError("no run to merge")
    first = results[0]
    if len(results) == 1:
        return first
    # a run whose records gave no device name (each problem failed before its worker said) names
    # only its device: it is a run of the same thing as any run on that device
    names = {r.device_name for r in results if r.device_name != r.device}
    for r in results[1:]:
        if (r.framework, r.device) != (first.framework, first.device) or len(names) > 1:
            raise GpuarenaError(
                f"runs of {first.framework} on {first.device_name} ({first.device}) and of "
                f"{r.framework} on {r.device_name} ({r.device}) are not runs of one thing: merge runs "
                "of one framework on one device"
            )
    total = sum(r.runs for r in results)
    by_problem: dict[str, list[ProblemTime]] = {}
    for r in results:
        for p in r.problems:
            by_problem.setdefault(p.problem, []).append(p)
    left_out = {name: why for r in results for name, why in r.left_out.items() if name not in by_problem}
    return first.model_copy(
        update={
            "runs": total,
            "device_name": next(iter(names), first.device_name),
            "problems": [merge_problem(times, total) for times in by_problem.values()],
            "left_out": dict(sorted(left_out.items())),
            "command": " ; ".join(dict.fromkeys(r.command for r in results)),
        }
    )


def join_parts(results: list[SuiteResult], retimed: bool = False) -> SuiteResult:
    """Results of one framework on one device that each timed other problems (one suite cut
    into device calls: `suite run --skip-in`), as one run: the problems in the parts' order, the
    left-out problems no part timed. A problem in two parts is refused: they would be two runs
    of it (`merge_runs` is for those), unless `retimed`: then a later part times again what an
    earlier one had (after a harness fix, say) and its time replaces the earlier one's."""
    if not results:
        raise GpuarenaError("no result to join")
    first = results[0]
    seen: dict[str, int] = {}
    for k, r in enumerate(results):
        if (r.framework, r.device, r.runs) != (first.framework, first.device, first.runs):
            raise GpuarenaError(
                f"part {k + 1} is {r.framework} on {r.device} over {r.runs} run(s), part 1 {first.framework} on "
                f"{first.device} over {first.runs}: join parts of one suite run"
            )
        for p in r.problems:
            if p.problem in seen and (not retimed or seen[p.problem] == k):
                raise GpuarenaError(
                    f"{p.problem} is in parts {seen[p.problem] + 1} and {k + 1}: parts time other problems "
                    "(suite merge takes runs of the same ones; --retimed lets a later part's time replace an earlier's)"
                )
            seen[p.problem] = k
    names = {r.device_name for r in results if r.device_name != r.device}
    if len(names) > 1:
        raise GpuarenaError(f"parts timed on {', '.join(sorted(names))}: join parts of one device's run")
    left_out = {name: why for r in results for name, why in r.left_out.items() if name not in seen}
    return first.model_copy(
        update={
            "device_name": next(iter(names), first.device_name),
            "problems": [p for k, r in enumerate(results) for p in r.problems if seen[p.problem] == k],
            "left_out": dict(sorted(left_out.items())),
            "command": " ; ".join(dict.fromkeys(r.command for r in results)),
        }
    )
