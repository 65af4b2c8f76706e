"""The score rule's worked examples (computed by hand in the comments; see gpuarena.migration.score)."""

from __future__ import annotations

import pytest

from gpuarena.migration.compare import OutputComparison
from gpuarena.migration.score import SpeedUp, measure_speedup, score, speed_points


def o(matched: bool, closeness: float = 1.0, produced: bool = True) -> OutputComparison:
    return OutputComparison(
        file="f",
        kind="tensor",
        method="exact",
        produced=produced,
        matched=matched,
        closeness=1.0 if matched else closeness,
        summary="",
    )


def up(low: float) -> SpeedUp:
    return SpeedUp(ratio=low, low=low, high=low)


def test_did_not_run_is_zero():
    s = score(False, [], up(3.0))
    assert (s.total, s.running, s.matching, s.speed) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    "outputs, matching",
    [
        ([o(True), o(True), o(True)], 40),  # mean 1 -> 40 -> 100
        ([o(True), o(False, 0.6)], 26),  # (1 + 0.3) / 2 = 0.65 -> 26 -> 86
        ([o(False, 0.0), o(False, 0.0)], 1),  # 0 -> 0, all written -> at least 1 -> 61
        ([o(False, 0.0, produced=False), o(False, 0.0)], 0),  # one missing -> 60
        ([o(False, 0.999)], 20),  # 0.4995 * 40 = 19.98 -> 20 -> 80
        ([o(True)] * 3 + [o(False, 0.0)], 30),  # 3/4 -> 30 -> 90 (the broken example port)
        ([o(True)] * 99 + [o(False, 0.9)], 39),  # (99 + 0.45)/100 * 40 = 39.78 -> 40, capped 39 -> 99
        ([o(True), o(False, 0.25)], 23),  # (1 + 0.125)/2 * 40 = 22.5 -> half up 23 -> 83
    ],
)
def test_matching_points(outputs, matching):
    s = score(True, outputs)
    assert (s.running, s.matching, s.speed, s.total) == (60, matching, 0, 60 + matching)


@pytest.mark.parametrize(
    "low, points",
    [
        (0.8, 0),
        (1.0, 0),
        (1.2, 13),  # 50 * log2(1.2) = 13.15
        (1.25, 16),  # 50 * log2(1.25) = 16.10
        (1.5, 29),  # 50 * log2(1.5) = 29.25
        (2.0, 50),
        (4.0, 50),
    ],
)
def test_speed_points(low, points):
    assert speed_points(up(low)) == points


def test_speed_only_when_all_matched():
    assert score(True, [o(True), o(True)], up(1.5)).total == 60 + 40 + 29
    s = score(True, [o(True), o(False, 0.5)], up(3.0))
    assert s.speed == 0 and "need every output to match" in " ".join(s.notes)
    assert score(True, [o(True)], None).total == 100


def test_measure_speedup_orientation():
    rate = measure_speedup([100.0, 100.0, 100.0], [150.0, 150.0, 150.0], higher_is_better=True)
    assert (rate.ratio, rate.low, rate.high) == pytest.approx((1.5, 1.5, 1.5))
    latency = measure_speedup([10.0, 10.0], [8.0, 8.0], higher_is_better=False)
    assert latency.ratio == pytest.approx(1.25)
    with pytest.raises(ValueError):
        measure_speedup([], [1.0], True)
