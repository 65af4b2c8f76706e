"""The ecosystem track's score of a ported app: 0 to 150 points.

Running (0 or 60): 0 if the app did not run (a setup command or a run failed, passed the time
limit, or changed the source or golden folder), else 60.

Matching (0 to 40, only when it ran): each of the n golden outputs gets a value
    v_i = 1                    if it matched,
    v_i = 0.5 * closeness_i    otherwise (0 when the app did not write it),
with closeness_i in [0, 1] as `gpuarena.migration.compare` defines it. Then
    match = floor(40 * mean(v) + 0.5)          (rounded half up)
    match = min(match, 39)   unless every output matched   (100 only for all matched)
    match = max(match, 1)    if every output was written    (61 for running with all outputs)

Speed-up (0 to 50, only when every output matched and both the golden record and the run have
performance figures): the speed-up s is golden / port for a figure where lower is better
(latency_ms), port / golden otherwise, as a ratio of medians with a 95% bootstrap interval
[low, high] (`gpuarena.harness.stats.bootstrap_ratio`, seed 0). Then
    speed = 0                                           if low <= 1
    speed = min(50, floor(50 * log2(low) + 0.5))        otherwise
so only a speed-up whose interval lies above 1 counts, and 2x (interval low end) earns the 50.

total = running + matching + speed.

Worked examples (tests/migration/test_score.py): 3 outputs all matched -> 100; 2 outputs, one matched
and one at closeness 0.6 -> 60 + round(40 * 0.65) = 86; 2 outputs written, both closeness 0 -> 61;
one missing and one closeness 0 -> 60; speed-up interval low 1.5 -> +29, low 1.2 -> +13, low 2 or
more -> +50, low 1.0 -> +0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from gpuarena.harness.stats import bootstrap_ratio
from gpuarena.migration.compare import OutputComparison

RUN_POINTS = 60
MATCH_POINTS = 40
SPEED_POINTS = 50


class SpeedUp(BaseModel):
    """The port's speed-up over the golden record, with its interval."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    ratio: float
    """Ratio of medians; above 1 means the port is faster."""
    low: float
    """The 95% bootstrap interval's low end."""
    high: float
    """The 95% bootstrap interval's high end."""


class Score(BaseModel):
    """The score and its parts."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    total: int
    """running + matching + speed, 0 to 150."""
    running: int
    """0 or 60."""
    matching: int
    """0 to 40."""
    speed: int
    """0 to 50."""
    mean_value: float | None = None
    """mean(v) over the outputs (see the module docstring); None when the app did not run."""
    notes: list[str] = []
    """How each part was reached, in words."""


def half_up(x: float) -> int:
    """Round half up (Python's round() rounds half to even)."""
    return math.floor(x + 0.5)


def measure_speedup(golden: Sequence[float], port: Sequence[float], higher_is_better: bool) -> SpeedUp:
    """The speed-up of the port's figures over the golden ones, oriented so above 1 is faster."""
    if not golden or not port or min(*golden, *port) <= 0:
        raise ValueError("a speed-up needs positive figures on both sides")
    ratio, low, high = bootstrap_ratio(port, golden) if higher_is_better else bootstrap_ratio(golden, port)
    return SpeedUp(ratio=ratio, low=low, high=high)


def speed_points(speedup: SpeedUp | None) -> int:
    if speedup is None or speedup.low <= 1:
        return 0
    return min(SPEED_POINTS, half_up(SPEED_POINTS * math.log2(speedup.low)))


def score(ran: bool, outputs: Sequence[OutputComparison], speedup: SpeedUp | None = None) -> Score:
    """The track's score (module docstring) from the run, the output comparisons and the speed-up."""
    if not ran:
        return Score(total=0, running=0, matching=0, speed=0, notes=["the app did not run: 0 points"])
    notes = [f"it ran: {RUN_POINTS} points"]
    values = [1.0 if o.matched else 0.5 * o.closeness if o.produced else 0.0 for o in outputs]
    mean = sum(values) / len(values) if values else 0.0
    matching = half_up(MATCH_POINTS * mean)
    all_matched = bool(outputs) and all(o.matched for o in outputs)
    all_written = bool(outputs) and all(o.produced for o in outputs)
    if not all_matched:
        matching = min(matching, MATCH_POINTS - 1)
    if all_written:
        matching = max(matching, 1)
    matched = sum(o.matched for o in outputs)
    notes.append(
        f"{matched} of {len(outputs)} outputs matched, mean value {mean:.4f}: {matching} of {MATCH_POINTS} points"
    )
    speed = 0
    if not all_matched:
        notes.append("no speed-up points: they need every output to match")
    elif speedup is None:
        notes.append("no speed-up points: no performance figure on one side")
    else:
        speed = speed_points(speedup)
        notes.append(
            f"speed-up {speedup.ratio:.3f}x, interval [{speedup.low:.3f}, {speedup.high:.3f}]: {speed} of "
            f"{SPEED_POINTS} points" + (" (the interval's low end must be above 1)" if speed == 0 else "")
        )
    return Score(
        total=RUN_POINTS + matching + speed,
        running=RUN_POINTS,
        matching=matching,
        speed=speed,
        mean_value=mean,
        notes=notes,
    )
