"""Statistics over raw timing samples: medians, bootstrap intervals, the stopping rule."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
TARGET_HALF_WIDTH = 0.01
"""Stop once the median's 95% interval is within ±1% of the median (or a resolution floor: `converged`)."""


@dataclass(frozen=True)
class Summary:
    median: float
    low: float
    high: float
    n: int

    @property
    def relative_half_width(self) -> float:
        return (self.high - self.low) / 2 / self.median if self.median > 0 else float("inf")


def _rng(seed: int | None) -> np.random.Generator:
    return np.random.default_rng(seed)


def bootstrap_median(samples: Sequence[float], confidence: float = 0.95, seed: int | None = 0) -> Summary:
    """Median with a percentile-bootstrap interval; robust to the long right tail of timings."""
    data = np.asarray(samples, dtype=np.float64)
    if data.size == 0:
        raise ValueError("no samples")
    median = float(np.median(data))
    if data.size == 1:
        return Summary(median, median, median, 1)
    idx = _rng(seed).integers(0, data.size, size=(BOOTSTRAP_RESAMPLES, data.size))
    medians = np.median(data[idx], axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(medians, [alpha, 1 - alpha])
    return Summary(median, float(min(low, median)), float(max(high, median)), int(data.size))


def bootstrap_ratio(
    numerator: Sequence[float], denominator: Sequence[float], confidence: float = 0.95, seed: int | None = 0
) -> tuple[float, float, float]:
    """Ratio of medians (e.g. reference time / solution time = speedup) with a bootstrap interval.

    The two sample sets are resampled independently: they come from interleaved blocks of
    separate calls, not from pairs.
    """
    a = np.asarray(numerator, dtype=np.float64)
    b = np.asarray(denominator, dtype=np.float64)
    ratio = float(np.median(a) / np.median(b))
    rng = _rng(seed)
    ma = np.median(a[rng.integers(0, a.size, size=(BOOTSTRAP_RESAMPLES, a.size))], axis=1)
    mb = np.median(b[rng.integers(0, b.size, size=(BOOTSTRAP_RESAMPLES, b.size))], axis=1)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(ma / mb, [alpha, 1 - alpha])
    return ratio, float(min(low, ratio)), float(max(high, ratio))


def bootstrap_rounds(
    numerator_rounds: Sequence[Sequence[float]],
    denominator_rounds: Sequence[Sequence[float]] | None = None,
    confidence: float = 0.95,
    seed: int | None = 0,
) -> tuple[float, float, float]:
    """The median of the numerator's samples (or the ratio of the two medians, e.g. speedup)
    with an interval from resampling whole rounds, paired: round k of both sides shares its
    inputs and the machine's state then. Calls within a round are not independent (a load that
    comes and goes slows a whole round), so resampling single calls gave intervals too narrow:
    on a loaded 2-core machine the reference timed against itself read 1.029 [1.017, 1.046]."""
    num = [np.asarray(r, dtype=np.float64) for r in numerator_rounds]
    den = [np.asarray(r, dtype=np.float64) for r in denominator_rounds] if denominator_rounds is not None else None
    if (
        not num
        or any(r.size == 0 for r in num)
        or (den is not None and (len(den) != len(num) or any(r.size == 0 for r in den)))
    ):
        raise ValueError("every round needs samples, and both sides the same rounds")

    def statistic(chosen: Sequence[int]) -> float:
        top = float(np.median(np.concatenate([num[i] for i in chosen])))
        return top / float(np.median(np.concatenate([den[i] for i in chosen]))) if den is not None else top

    value = statistic(range(len(num)))
    if len(num) == 1:
        return value, value, value
    picks = _rng(seed).integers(0, len(num), size=(BOOTSTRAP_RESAMPLES, len(num)))
    if len({r.size for r in num + (den or [])}) == 1:  # rounds of one size (the usual case): all at once
        values = _resampled_medians(np.stack(num), picks)
        if den is not None:
            values = values / _resampled_medians(np.stack(den), picks)
    else:
        values = np.array([statistic(row) for row in picks])
    alpha = (1 - confidence) / 2
    low, high = np.quantile(values, [alpha, 1 - alpha])
    return value, float(min(low, value)), float(max(high, value))


def _resampled_medians(rounds: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """The median of the samples of each row of picked rounds (rounds: one row per round, all
    of one size): what `statistic` computes one row at a time, in one pass (12 rounds of 4
    calls, both sides: 0.02 s on the 2-core VM against 0.12 s; three calls a workload)."""
    return np.median(rounds[picks].reshape(picks.shape[0], -1), axis=1)


def round_spread(numerator_rounds: Sequence[Sequence[float]], denominator_rounds: Sequence[Sequence[float]]) -> float:
    """How much the per-round ratio of medians varies between rounds: its median absolute
    deviation over its median (0 on a quiet machine; 0.05 means a typical round is 5% off)."""
    ratios = np.array([np.median(a) / np.median(b) for a, b in zip(numerator_rounds, denominator_rounds)])
    middle = float(np.median(ratios))
    return float(np.median(np.abs(ratios - middle)) / middle) if middle > 0 else 0.0


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> Summary:
    """Median with a distribution-free interval: the order statistics whose ranks bracket the
    median's with the given confidence (the binomial's normal approximation). What the
    percentile bootstrap of the median approaches, in one partial sort instead of 2000 resamples:
    the stopping rule asks for it after every round, and the bootstrap took 15 ms a round on the
    2-core VM, 0.9 s of a 2 s CPU timing budget (bench/research/round_costs.py)."""
    data = np.asarray(samples, dtype=np.float64)
    n = data.size
    if n == 0:
        raise ValueError("no samples")
    median = float(np.median(data))
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    half = z * np.sqrt(n) / 2
    lo_rank, hi_rank = int(np.floor(n / 2 - half)), int(np.ceil(n / 2 + half))  # 0-based, inclusive
    lo_rank, hi_rank = max(lo_rank, 0), min(hi_rank, n - 1)
    low, high = np.partition(data, (lo_rank, hi_rank))[[lo_rank, hi_rank]]
    return Summary(median, float(min(low, median)), float(max(high, median)), int(n))


def converged(
    samples: Sequence[float], min_samples: int, target: float = TARGET_HALF_WIDTH, floor: float = 0.0
) -> bool:
    """The stopping rule: enough samples and a 95% interval of the median within ±target of it,
    or within ±floor (the samples' unit) where that is wider: a resolution below which rounds of
    the same kernel do not agree anyway."""
    if len(samples) < min_samples:
        return False
    interval = median_interval(samples)
    return (interval.high - interval.low) / 2 <= max(target * interval.median, floor)


def weighted_geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    """The score: a weighted geometric mean, so a 2x win and a 2x loss cancel."""
    v = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if v.size == 0 or np.any(v <= 0) or w.sum() <= 0:
        raise ValueError("geometric mean needs positive values and weights")
    return float(np.exp(np.sum(w * np.log(v)) / np.sum(w)))
