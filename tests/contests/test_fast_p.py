"""fast_p (KernelBench style): worked examples computed by hand."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuarena.contests.rules import fast_p

from .factory import contest, entry, table

PROBLEMS = ["p1", "p2", "p3", "p4"]


def test_worked_example():
    entries = [
        # amy: 3.0, 1.5, 0.8 -> fast_0 3/4, fast_1 2/4, fast_2 1/4.
        entry("amy", "p1", 3.0),
        entry("amy", "p2", 1.5),
        entry("amy", "p3", 0.8),
        # bo: 1.2, 1.1, 0.9 -> 3/4, 2/4, 0: below amy on fast_2.
        entry("bo", "p1", 1.2),
        entry("bo", "p2", 1.1),
        entry("bo", "p3", 0.9),
        # cal: 2.5, 0.5, 0.7 -> 3/4, 1/4, 1/4: below bo on fast_1.
        entry("cal", "p1", 2.5),
        entry("cal", "p2", 0.5),
        entry("cal", "p3", 0.7),
        # dee and eve: 5.0, 5.0 -> 2/4, 2/4, 2/4: a shared place.
        entry("dee", "p1", 5.0),
        entry("dee", "p2", 5.0),
        entry("eve", "p1", 5.0),
        entry("eve", "p2", 5.0),
        # fay: exactly 1.0 is not above p = 1 -> 1/4, 0, 0.
        entry("fay", "p4", 1.0),
        # gus: failed only.
        entry("gus", "p1"),
        # Never counted: another device kind, before the start, test mode, not in the contest.
        entry("amy", "p4", 10.0, device_kind="A100"),
        entry("bo", "p4", 3.0, hours=-2),
        entry("cal", "p2", 9.0, mode="test"),
        entry("gus", "p5", 9.0),
    ]
    result = fast_p.standings(contest({"name": "fast_p", "p": [0, 1, 2]}, PROBLEMS), entries)
    assert table(result) == [
        (1, "amy", 0.75, None),
        (2, "bo", 0.75, "higher fast_2"),
        (3, "cal", 0.75, "higher fast_1"),
        (4, "dee", 0.5, None),
        (4, "eve", 0.5, None),
        (6, "fay", 0.25, None),
        (7, "gus", 0.0, None),
    ]
    rows = {r.contestant: r for r in result.rows}
    assert rows["amy"].figures == {"fast_0": 0.75, "fast_1": 0.5, "fast_2": 0.25}
    assert rows["fay"].figures == {"fast_0": 0.25, "fast_1": 0.0, "fast_2": 0.0}
    assert rows["amy"].breakdown == {"p1@H100": 3.0, "p2@H100": 1.5, "p3@H100": 0.8}
    assert result.tie_rules == ["higher fast_1", "higher fast_2"]


def test_first_p_decides_then_the_next():
    # With p = [1.5, 0]: x has one problem above 1.5 and two solved; y one above 1.5 and one
    # solved; z none above 1.5 but four solved.
    entries = [
        entry("x", "p1", 2.0),
        entry("x", "p2", 1.0),
        entry("y", "p1", 1.6),
        *(entry("z", p, 1.2) for p in PROBLEMS),
    ]
    result = fast_p.standings(contest({"name": "fast_p", "p": [1.5, 0]}, PROBLEMS), entries)
    assert table(result) == [
        (1, "x", 0.25, None),
        (2, "y", 0.25, "higher fast_0"),
        (3, "z", 0.0, None),
    ]


def test_each_device_kind_is_a_task():
    config = contest({"name": "fast_p", "p": [0]}, ["p1"], device_kinds=["H100", "A100"])
    entries = [entry("a", "p1", 1.1), entry("a", "p1", 1.3, device_kind="A100"), entry("b", "p1", 4.0)]
    assert table(fast_p.standings(config, entries)) == [(1, "a", 1.0, None), (2, "b", 0.5, None)]


def test_flagged_resubmission_does_not_count():
    # b's second entry (2.1, interval 1.0-3.0) does not clear its 0.9: left out, so b is not above p = 1.
    entries = [entry("b", "p1", 0.9, hours=1), entry("b", "p1", 2.1, hours=2, score_low=0.9, score_high=3.0)]
    result = fast_p.standings(contest({"name": "fast_p", "p": [1]}, ["p1"]), entries)
    assert table(result) == [(1, "b", 0.0, None)]


@pytest.mark.parametrize(
    "rule, message",
    [
        ({"name": "fast_p", "p": []}, "at least 1 item"),
        ({"name": "fast_p", "p": [0, 1, 1]}, "p values must be unique; repeated: 1"),
        ({"name": "fast_p", "p": [-1]}, "must not be negative"),
        ({"name": "fast_p", "points": [1]}, "Extra inputs are not permitted"),
    ],
)
def test_bad_fast_p_config(rule, message):
    with pytest.raises(ValidationError, match=message):
        contest(rule, PROBLEMS)
