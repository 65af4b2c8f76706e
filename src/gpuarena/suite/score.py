"""The suite score: how much faster a result is than a baseline, problem by problem and in all.

For each problem both results timed (PASSED on both sides), the ratio r = baseline time / this
time (above 1: faster than the baseline), with the interval [baseline low / this high, baseline
high / this low] from the two sides' 95% intervals. The score is the weighted geometric mean of
the ratios with the problems' weights, and its interval the same mean of the interval ends (as
wide as the problems' own intervals allow, never narrower). Problems that either side did not
time are listed and left out of the score; a score over fewer problems than the baseline has
says so (`covered`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from gpuarena.errors import GpuarenaError
from gpuarena.harness.stats import weighted_geomean
from gpuarena.suite.model import SuiteResult


class ProblemRatio(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    problem: str
    """The problem's id."""
    level: int
    """Its level."""
    weight: float
    """Its weight."""
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
    covered: int
    """Problems in the score."""
    left_out: dict[str, str]
    """Problems left out, and why."""
    ratios: list[ProblemRatio]
    """Each problem's ratio, slowest relative to the baseline first."""
    by_level: dict[int, float]
    """The score over each level's problems alone."""
    by_model: dict[str, float] = {}
    """The score over the problems harvested from each model alone (model_tags)."""


NOT_MODELS = {"harvested", "prefill", "decode"}
"""Tags a harvested problem carries besides its models' (dataset/assemble.py): its origin and phases."""


def model_tags(tags: list[str], operator: str | None = None) -> list[str]:
    """The models a harvested problem comes from, among its tags (none for a hand-written one:
    those carry no `harvested` tag). The operator tag ("aten.mm.default", "module:MLP") is not one."""
    if "harvested" not in tags:
        return []
    return [t for t in tags if t not in NOT_MODELS and t != operator and "." not in t and ":" not in t]


def _by(ratios: list[ProblemRatio], key) -> dict:  # type: ignore[no-untyped-def]
    """The weighted geometric mean of the ratios per group (a problem may be in several)."""
    groups: dict = {}
    for r in ratios:
        for group in key(r):
            groups.setdefault(group, []).append(r)
    return {g: weighted_geomean([r.ratio for r in rs], [r.weight for r in rs]) for g, rs in sorted(groups.items())}


def _label(r: SuiteResult) -> str:
    return f"{r.framework} on {r.device_name}"


def compare(baseline: SuiteResult, result: SuiteResult) -> Comparison:
    base = {p.problem: p for p in baseline.problems}
    ratios, left_out = [], {}
    for p in result.problems:
        b = base.get(p.problem)
        if b is None:
            left_out[p.problem] = "not in the baseline"
        elif p.time_us is None or b.time_us is None:
            left_out[p.problem] = f"not timed: {p.status if p.time_us is None else 'baseline ' + b.status}"
        else:
            ratios.append(ProblemRatio(problem=p.problem, level=p.level, weight=p.weight, tags=p.tags,
                                       ratio=b.time_us / p.time_us,
                                       low=b.low_us / p.high_us, high=b.high_us / p.low_us))
    for name in base.keys() - {p.problem for p in result.problems}:
        left_out[name] = "not in the result"
    if not ratios:
        raise GpuarenaError(f"{_label(result)} and the baseline {_label(baseline)} have no timed problem in common")
    weights = [r.weight for r in ratios]
    return Comparison(baseline=_label(baseline), result=_label(result),
                      score=weighted_geomean([r.ratio for r in ratios], weights),
                      low=weighted_geomean([r.low for r in ratios], weights),
                      high=weighted_geomean([r.high for r in ratios], weights),
                      covered=len(ratios), left_out=dict(sorted(left_out.items())),
                      ratios=sorted(ratios, key=lambda r: r.ratio),
                      by_level=_by(ratios, lambda r: [r.level]), by_model=_by(ratios, lambda r: model_tags(r.tags)))
