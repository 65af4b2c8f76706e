"""The suite score: how much faster a result is than a baseline, problem by problem and in all.

For each problem both results timed (PASSED on both sides), the ratio r = baseline time / this
time (above 1: faster than the baseline), with the interval [baseline low / this high, baseline
high / this low] from the two sides' 95% intervals. The score is the weighted geometric mean of
the ratios with the problems' weights, and its interval the same mean of the interval ends (as
wide as the problems' own intervals allow, never narrower). Problems that either side did not
time are listed and left out of the score; a score over fewer problems than the baseline has
says so (`covered`). The score by level and by model weigh with the problems' level_weight and
model_weights where every problem of the level or model has them (`gpuarena dataset weigh`).

That interval is the timings' only. How much the score rests on which problems the dataset holds
is a second one (`problems_low`, `problems_high`): the same score over the problem set drawn again
with replacement, each problem with its weight, PROBLEM_RESAMPLES times (seeded, so a comparison
always gives the same figures), the middle 95%. Two GPUs whose problem intervals overlap differ by
less than the dataset's choice of problems can show.

Runs (suite/runs.py): a result of several runs gives each problem an interval spanning every
run's, so the timings' interval covers the run-to-run spread too; the runs' own spread is given
apart (`runs_low`, `runs_high`: the lowest and highest score over every pairing of a baseline
run with a result run), and the problem sets' draws pick a run of each side as well (a bootstrap
over problems and runs). Where each side ran once, the interval is the noise within one run only,
and `spread` says so. A comparison across devices or workload sets is refused unless asked
(suite/comparable.py); every problem not scored is in left_out with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from gpuarena.errors import GpuarenaError
from gpuarena.harness.stats import weighted_geomean
from gpuarena.suite.comparable import check_comparable, missing_reason
from gpuarena.suite.model import SuiteResult
from gpuarena.suite.runs import run_times


class ProblemRatio(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    problem: str
    """The problem's id."""
    level: int
    """Its level."""
    weight: float
    """Its weight."""
    level_weight: float | None = None
    """Its weight among its level's problems (None: not given)."""
    model_weights: dict[str, float] = {}
    """Its share of each model-phase's time, by label (`llama-prefill`; empty: not given)."""
    tags: list[str] = []
    """Its tags (the models it was harvested from among them: model_tags)."""
    ratio: float
    """Baseline time / this time: above 1 is faster than the baseline."""
    low: float
    """The ratio's interval, low end."""
    high: float
    """And high end."""


class Comparison(BaseModel):
    """A result against a baseline."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    baseline: str
    """The baseline's framework and device."""
    result: str
    """The result's framework and device."""
    score: float | None
    """The weighted geometric mean of the ratios (None: no problem in common)."""
    low: float | None
    """Its interval, low end."""
    high: float | None
    """And high end."""
    problems_low: float | None = None
    """The score's 95% interval over resampled problem sets, low end (see the module's docstring)."""
    problems_high: float | None = None
    """And high end."""
    runs_low: float | None = None
    """The lowest score over every pairing of a baseline run with a result run (None: each side ran once)."""
    runs_high: float | None = None
    """And the highest."""
    baseline_runs: int = 1
    """How many runs the baseline holds."""
    result_runs: int = 1
    """And the result."""
    spread: str = ""
    """What the interval covers, in words: the noise within one run only, or the spread over runs."""
    covered: int
    """Problems in the score."""
    left_out: dict[str, str]
    """Problems left out, and why ("not in the baseline", "failed in the result", ...: the text before
    the first colon is the kind, left_out_counts counts them)."""
    left_out_counts: dict[str, int] = {}
    """How many problems were left out for each kind of reason."""
    ratios: list[ProblemRatio]
    """Each problem's ratio, slowest relative to the baseline first."""
    by_level: dict[int, float]
    """The score over each level's problems alone, weighed by their level_weight where every one
    of the level's has one (else by weight)."""
    by_model: dict[str, float] = {}
    """The score over the problems harvested from each model alone (model_tags), weighed by their
    model_weights for that model where every one has them (else by weight)."""


PROBLEM_RESAMPLES = 2000
"""Problem sets drawn for the interval over problems."""

_Group = TypeVar("_Group", int, str)
"""What _by groups the ratios by: a level or a model."""

NOT_MODELS = {"harvested", "prefill", "decode"}
"""Tags a harvested problem carries besides its models' (dataset/assemble.py): its origin and phases."""


def model_tags(tags: list[str], operator: str | None = None) -> list[str]:
    """The models a harvested problem comes from, among its tags (none for a hand-written one:
    those carry no `harvested` tag). The operator tag ("aten.mm.default", "module:MLP") is not one."""
    if "harvested" not in tags:
        return []
    return [t for t in tags if t not in NOT_MODELS and t != operator and "." not in t and ":" not in t]


def model_weight(r: ProblemRatio, model: str) -> float | None:
    """The problem's share of a model's time (the sum over the model's phases: a label is
    `<model slug>-<phase>`, the tags hold the slug and the phase apart), or None where its
    model_weights name none of the model's phases."""
    shares = [w for label, w in r.model_weights.items() if label.rsplit("-", 1)[0] == model]
    return sum(shares) if shares else None


def _by(
    ratios: list[ProblemRatio],
    key: Callable[[ProblemRatio], Iterable[_Group]],
    own: Callable[[ProblemRatio, _Group], float | None] = lambda r, g: None,
) -> dict[_Group, float]:
    """The weighted geometric mean of the ratios per group (a problem may be in several). own:
    a problem's weight within the group (dataset/weights.py), used where every problem of the
    group has one and they do not all weigh 0; else each problem's weight: the two are on
    different scales and are never mixed within a group."""
    groups: dict[_Group, list[ProblemRatio]] = {}
    for r in ratios:
        for group in key(r):
            groups.setdefault(group, []).append(r)
    scores: dict[_Group, float] = {}
    for g, rs in sorted(groups.items()):
        owns = [own(r, g) for r in rs]
        weights = [float(w) for w in owns if w is not None]
        if len(weights) < len(rs) or sum(weights) <= 0:
            weights = [r.weight for r in rs]
        if sum(weights) > 0:  # a group of weightless problems has no score
            scores[g] = weighted_geomean([r.ratio for r in rs], weights)
    return scores


def problem_interval(
    ratios: list[float] | list[list[float]],
    weights: list[float],
    resamples: int = PROBLEM_RESAMPLES,
    seed: int = 0,
) -> tuple[float, float]:
    """The middle 95% of the weighted geometric mean over problem sets drawn with replacement
    (one draw of n problems from the n, each with its own weight), in one numpy pass. ratios is
    one ratio a problem, or one row of ratios per pairing of runs: then each draw also picks a
    pairing (a run of each side), so the interval covers the runs as well as the problems. A
    draw of only weightless problems has no score and is not counted."""
    logs = np.log(np.atleast_2d(np.asarray(ratios, dtype=np.float64)))
    w = np.asarray(weights, dtype=np.float64)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, logs.shape[1], size=(resamples, logs.shape[1]))
    pairing = (
        rng.integers(0, logs.shape[0], size=(resamples, 1)) if logs.shape[0] > 1 else np.zeros((resamples, 1), int)
    )
    total = w[picks].sum(axis=1)
    weighted = (w[picks] * logs[pairing, picks]).sum(axis=1)
    scores = np.exp(weighted[total > 0] / total[total > 0])
    if not scores.size:
        raise GpuarenaError("no problem with a weight above 0: the score is not defined")
    low, high = np.quantile(scores, [0.025, 0.975])
    return float(low), float(high)


def _label(r: SuiteResult) -> str:
    return f"{r.framework} on {r.device_name}"


def run_pairings(base: list[list[float]], result: list[list[float]]) -> list[list[float]]:
    """One row per pairing of a baseline run with a result run: each problem's ratio in that
    pairing (base[p][i] / result[p][j]). Runs beyond the fewest a problem has are not paired."""
    nb, nr = min(len(b) for b in base), min(len(r) for r in result)
    return [[b[i] / r[j] for b, r in zip(base, result)] for i in range(nb) for j in range(nr)]


def _spread(base_runs: int, result_runs: int) -> str:
    if base_runs == 1 and result_runs == 1:
        return (
            "within one run only: each side ran once, so the run-to-run spread is not measured "
            "(gpuarena suite run --runs N measures it)"
        )
    return (
        f"over {base_runs} run(s) of the baseline and {result_runs} of the result: each problem's interval "
        "spans its runs', the runs' scores are every pairing of a baseline run with a result run"
    )


def compare(
    baseline: SuiteResult, result: SuiteResult, across_devices: bool = False, across_workloads: bool = False
) -> Comparison:
    """The result scored against the baseline (see the module's docstring); refused across devices
    or workload sets unless asked."""
    check_comparable(baseline, result, across_devices, across_workloads)
    base = {p.problem: p for p in baseline.problems}
    ratios, left_out = [], {}
    base_runs, result_runs = [], []
    for p in result.problems:
        b = base.get(p.problem)
        if b is None or p.time_us is None or b.time_us is None:
            left_out[p.problem] = missing_reason(p.problem, baseline, result)
        else:
            # a timed problem has its interval too (run.problem_time)
            assert b.low_us is not None and b.high_us is not None and p.low_us is not None and p.high_us is not None
            ratios.append(
                ProblemRatio(
                    problem=p.problem,
                    level=p.level,
                    weight=p.weight,
                    level_weight=p.level_weight,
                    model_weights=p.model_weights,
                    tags=p.tags,
                    ratio=b.time_us / p.time_us,
                    low=b.low_us / p.high_us,
                    high=b.high_us / p.low_us,
                )
            )
            base_runs.append(run_times(b))
            result_runs.append(run_times(p))
    for name in base.keys() - {p.problem for p in result.problems}:
        left_out[name] = missing_reason(name, baseline, result)
    if not ratios:
        raise GpuarenaError(f"{_label(result)} and the baseline {_label(baseline)} have no timed problem in common")
    weights = [r.weight for r in ratios]
    if sum(weights) <= 0:
        raise GpuarenaError(
            f"the {len(ratios)} problem(s) the two results have in common all weigh 0 (in the dataset, an op whose "
            "every call a kept fusion holds: its time is the fusion's); the whole score is not defined, time "
            "more of the dataset (each level's level weights score it: docs/dataset.md)"
        )
    pairings = run_pairings(base_runs, result_runs)
    runs_scores = [weighted_geomean(row, weights) for row in pairings]
    problems_low, problems_high = problem_interval(pairings, weights)
    nb, nr = min(map(len, base_runs)), min(map(len, result_runs))
    kinds: dict[str, int] = {}
    for why in left_out.values():
        kinds[why.split(":")[0]] = kinds.get(why.split(":")[0], 0) + 1
    return Comparison(
        baseline=_label(baseline),
        result=_label(result),
        score=weighted_geomean([r.ratio for r in ratios], weights),
        problems_low=problems_low,
        problems_high=problems_high,
        low=weighted_geomean([r.low for r in ratios], weights),
        high=weighted_geomean([r.high for r in ratios], weights),
        runs_low=min(runs_scores) if len(runs_scores) > 1 else None,
        runs_high=max(runs_scores) if len(runs_scores) > 1 else None,
        baseline_runs=nb,
        result_runs=nr,
        spread=_spread(nb, nr),
        covered=len(ratios),
        left_out=dict(sorted(left_out.items())),
        left_out_counts=dict(sorted(kinds.items())),
        ratios=sorted(ratios, key=lambda r: r.ratio),
        by_level=_by(ratios, lambda r: [r.level], lambda r, _level: r.level_weight),
        by_model=_by(ratios, lambda r: model_tags(r.tags), model_weight),
    )
