"""Statistics: interval coverage on synthetic samples, the stopping rule, the score."""

from __future__ import annotations

import numpy as np
import pytest

from gpuarena.harness.stats import bootstrap_median, bootstrap_ratio, converged, weighted_geomean


def test_median_interval_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    true_median = 100.0  # lognormal with mu = log(100): median 100, a long right tail like timings
    trials, covered = 300, 0
    for i in range(trials):
        samples = rng.lognormal(np.log(true_median), 0.1, size=60)
        s = bootstrap_median(samples, seed=i)
        covered += s.low <= true_median <= s.high
    assert 0.88 <= covered / trials <= 0.99


def test_ratio_interval_covers_the_true_speedup():
    rng = np.random.default_rng(2)
    covered = 0
    for i in range(200):
        ref = rng.lognormal(np.log(30.0), 0.05, size=50)
        sol = rng.lognormal(np.log(10.0), 0.05, size=50)
        ratio, low, high = bootstrap_ratio(ref, sol, seed=i)
        covered += low <= 3.0 <= high
        assert low <= ratio <= high
    assert covered / 200 >= 0.88


def test_median_is_robust_to_outliers():
    samples = [10.0] * 95 + [10_000.0] * 5
    s = bootstrap_median(samples)
    assert s.median == 10.0 and s.high == 10.0


def test_stopping_rule():
    rng = np.random.default_rng(3)
    tight = rng.normal(100, 0.5, size=40)
    noisy = rng.normal(100, 30, size=40)
    assert converged(tight, min_samples=30)
    assert not converged(tight[:20], min_samples=30)  # too few samples
    assert not converged(noisy, min_samples=30)


def test_weighted_geometric_mean():
    assert weighted_geomean([2.0, 0.5], [1, 1]) == pytest.approx(1.0)
    assert weighted_geomean([4.0, 1.0], [1, 3]) == pytest.approx(4 ** 0.25)
    with pytest.raises(ValueError):
        weighted_geomean([0.0], [1])
