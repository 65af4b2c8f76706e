"""Statistics: interval coverage on synthetic samples, the stopping rule, the score."""

from __future__ import annotations

import numpy as np
import pytest

from gpuarena.harness.stats import bootstrap_median, bootstrap_ratio, converged, median_interval, weighted_geomean


def test_median_interval_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    true_median = 100.0  # lognormal with mu = log(100): median 100, a long right tail like timings
    trials, covered = 300, 0
    for i in range(trials):
        samples = rng.lognormal(np.log(true_median), 0.1, size=60)
        s = bootstrap_median(samples, seed=i)
        covered += s.low <= true_median <= s.high
    assert 0.88 <= covered / trials <= 0.99


def test_the_order_statistic_interval_covers_the_median_as_the_bootstrap_does():
    """The stopping rule's interval (order statistics, no resampling): about 95% coverage on
    timing-like samples, and about as wide as the bootstrap's on the same samples."""
    rng = np.random.default_rng(4)
    covered, ratios = 0, []
    for i in range(300):
        samples = rng.lognormal(np.log(100.0), 0.1, size=60)
        s = median_interval(samples)
        covered += s.low <= 100.0 <= s.high
        assert s.low <= s.median <= s.high and s.median == float(np.median(samples))
        if i < 40:
            ratios.append(s.relative_half_width / bootstrap_median(samples, seed=i).relative_half_width)
    assert 0.90 <= covered / 300 <= 0.99
    assert 0.7 <= float(np.median(ratios)) <= 1.4
    one = median_interval([5.0])
    assert (one.low, one.median, one.high) == (5.0, 5.0, 5.0)
    with pytest.raises(ValueError):
        median_interval([])


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


def test_the_stopping_rule_s_floor_only_widens_the_target_for_the_smallest_times():
    rounds = [2900.0, 2905.0, 2910.0, 2880.0, 2940.0, 2950.0]  # ns: ±1% is ±29 ns, the interval ±35
    assert not converged(rounds, min_samples=4)
    assert converged(rounds, min_samples=4, floor=50)
    large = [r * 100 for r in rounds]  # the same scatter in proportion at 290 µs: ±1% binds, not 50 ns
    assert not converged(large, min_samples=4, floor=50)
    assert not converged([2900.0, 2905.0, 3000.0, 2800.0], min_samples=4, floor=50)  # ±100 ns is not resolution


def test_weighted_geometric_mean():
    assert weighted_geomean([2.0, 0.5], [1, 1]) == pytest.approx(1.0)
    assert weighted_geomean([4.0, 1.0], [1, 3]) == pytest.approx(4**0.25)
    with pytest.raises(ValueError):
        weighted_geomean([0.0], [1])


def test_round_intervals_cover_what_varies_between_rounds():
    """A busy machine slows whole rounds. The reference timed against itself, each side's
    rounds slowed by an independent load: resampling single calls gives a narrow interval that
    can exclude 1; resampling whole rounds (paired) covers it."""
    import numpy as np

    from gpuarena.harness.stats import bootstrap_ratio, bootstrap_rounds, round_spread

    rng = np.random.default_rng(7)
    a = [list(100 * rng.uniform(1.0, 1.3) * rng.normal(1, 0.01, 16)) for _ in range(12)]
    b = [list(100 * rng.uniform(1.0, 1.3) * rng.normal(1, 0.01, 16)) for _ in range(12)]
    _, call_low, call_high = bootstrap_ratio([x for r in a for x in r], [x for r in b for x in r])
    ratio, low, high = bootstrap_rounds(a, b)
    assert low <= 1.0 <= high, (low, high)
    assert high - low > 1.5 * (call_high - call_low)
    assert round_spread(a, b) > 0.05  # and the record calls it noisy
    # a load that slows both sides of a round alike cancels in the paired ratio
    load = rng.uniform(1.0, 1.5, 12)
    fast = [list(50 * f * rng.normal(1, 0.005, 16)) for f in load]
    slow = [list(100 * f * rng.normal(1, 0.005, 16)) for f in load]
    ratio, low, high = bootstrap_rounds(slow, fast)
    assert 1.98 < low <= ratio <= high < 2.02
    assert round_spread(slow, fast) < 0.01
    median, low, high = bootstrap_rounds(fast)  # one side: the median's interval over rounds
    assert low <= median <= high and low > 49


def test_round_intervals_of_equal_rounds_are_those_of_one_round_at_a_time():
    """Rounds of one size are resampled in one pass; the interval is the one the round-by-round
    statistic gives (same picks, same medians), for one side and for a ratio."""
    import numpy as np

    from gpuarena.harness import stats

    rng = np.random.default_rng(3)
    a = [list(rng.lognormal(4, 0.1, 4)) for _ in range(9)]
    b = [list(rng.lognormal(3, 0.1, 4)) for _ in range(9)]
    ragged = a[:-1] + [a[-1][:3]]  # one round short: the round-by-round path

    def one_at_a_time(num, den=None):
        picks = np.random.default_rng(0).integers(0, len(num), size=(stats.BOOTSTRAP_RESAMPLES, len(num)))
        values = []
        for row in picks:
            top = float(np.median(np.concatenate([num[i] for i in row])))
            values.append(top / float(np.median(np.concatenate([den[i] for i in row]))) if den else top)
        return np.quantile(values, [0.025, 0.975])

    for num, den in ((a, None), (a, b), (ragged, None)):
        _, low, high = stats.bootstrap_rounds(num, den)
        want_low, want_high = one_at_a_time(num, den)
        assert (low, high) == (min(want_low, _), max(want_high, _))


def test_round_intervals_refuse_unpaired_rounds():
    import pytest

    from gpuarena.harness.stats import bootstrap_rounds

    with pytest.raises(ValueError):
        bootstrap_rounds([[1.0], [2.0]], [[1.0]])
    with pytest.raises(ValueError):
        bootstrap_rounds([[1.0], []], [[1.0], [2.0]])
    assert bootstrap_rounds([[1.0, 3.0]], [[1.0]]) == (2.0, 2.0, 2.0)


def test_a_noisy_run_says_so_in_the_record_and_the_table():
    import io

    from rich.console import Console

    from gpuarena.cli.render import render
    from gpuarena.contracts.records import Evaluation

    record = Evaluation(
        status="PASSED",
        problem="level1/softmax",
        solution_hash="0" * 64,
        device="cpu",
        mode="benchmark",
        workloads=[
            {
                "name": "small",
                "status": "PASSED",
                "speedup": 1.03,
                "speedup_ci95": (0.9, 1.2),
                "round_spread": 0.12,
                "noisy": True,
            },
            {"name": "big", "status": "PASSED", "speedup": 2.0, "speedup_ci95": (1.98, 2.02), "round_spread": 0.004},
        ],
    )
    out = io.StringIO()
    render(record, Console(file=out, width=200))
    text = out.getvalue()
    assert "1.03x (0.90-1.20) noisy" in text and "2.00x (1.98-2.02)" in text and "2.00x (1.98-2.02) noisy" not in text
    assert "varied up to 12% between rounds on 1 workload(s)" in text
