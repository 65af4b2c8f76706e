"""fastest (GPU MODE style): worked examples computed by hand."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from gpuarena.contests.rules import fastest

from .factory import contest, entry, table

PROBLEMS = ["p1", "p2", "p3", "p4"]
POINTS = {"name": "fastest", "points": [10, 8, 6]}


def points_entries():
    return [
        # p1: alice 3.0 (an honest improvement on her 2.5), carol 2.5, bob 2.0 at h2, dave 2.0 at h3
        # -> alice 10, carol 8, bob 6 (earlier than dave at the same speed-up), dave 4th: past the table, 0.
        entry("alice", "p1", 2.5, hours=1),
        entry("alice", "p1", 3.0, hours=4, score_low=2.8, score_high=3.2),
        entry("carol", "p1", 2.5, hours=2),
        entry("bob", "p1", 2.0, hours=2),
        entry("dave", "p1", 2.0, hours=3),
        # bob's resubmission does not clear his 2.0 (low end 2.0): flagged, left out. Counted, it
        # would put bob 2nd on p1 (8) and carol 3rd (6).
        entry("bob", "p1", 2.6, hours=6, score_low=2.0, score_high=3.2),
        # p2: bob 10, carol 8, alice 6.
        entry("bob", "p2", 4.0, hours=2),
        entry("carol", "p2", 3.0, hours=2),
        entry("alice", "p2", 1.2, hours=2),
        # p3: dave and erin equal in speed-up and time: a shared 1st place, 10 each.
        entry("dave", "p3", 5.0, hours=3),
        entry("erin", "p3", 5.0, hours=3),
        entry("alice", "p3", hours=3),  # WRONG_VALUES: no place
        # p4: gina 10; hank and ivy share 2nd (8 each); jack is 4th: 0.
        entry("gina", "p4", 9.0, hours=5),
        entry("hank", "p4", 2.0, hours=5),
        entry("ivy", "p4", 2.0, hours=5),
        entry("jack", "p4", 1.0, hours=5),
        # kate only failed: a row with 0.
        entry("kate", "p4", hours=5, status="TIMEOUT"),
        # Never counted: before the start, at the end (the window is half-open), another device
        # kind, not ranked mode, a problem not in the contest.
        entry("frank", "p1", 100.0, hours=-1),
        entry("hank", "p1", 80.0, hours=48),
        entry("erin", "p2", 50.0, hours=3, device_kind="A100"),
        entry("dave", "p2", 60.0, hours=3, mode="benchmark"),
        entry("gina", "p9", 70.0, hours=3),
    ]


def test_points_worked_example():
    result = fastest.standings(contest(POINTS, PROBLEMS), points_entries())
    # alice 10+6, bob 6+10 (1 first place each, 2 solved); carol 8+8 (no first place);
    # dave 0+10 (1 first, 2 solved); erin 10, gina 10 (1 first, 1 solved); hank 8, ivy 8; jack 0 (1 solved);
    # kate 0 (none solved).
    assert table(result) == [
        (1, "alice", 16.0, None),
        (1, "bob", 16.0, None),
        (3, "carol", 16.0, "more first places"),
        (4, "dave", 10.0, None),
        (5, "erin", 10.0, "more problems solved"),
        (5, "gina", 10.0, None),
        (7, "hank", 8.0, None),
        (7, "ivy", 8.0, None),
        (9, "jack", 0.0, None),
        (10, "kate", 0.0, "more problems solved"),
    ]
    rows = {r.contestant: r for r in result.rows}
    assert rows["alice"].breakdown == {"p1@H100": 10.0, "p2@H100": 6.0}
    assert rows["dave"].breakdown == {"p1@H100": 0.0, "p3@H100": 10.0}
    assert rows["carol"].figures == {"first places": 0, "solved": 2}
    assert result.tie_rules == ["more first places", "more problems solved"]
    assert (result.contest, result.rule) == ("test-contest", "fastest")


def test_points_with_screening_off_count_the_flagged_resubmission():
    config = contest(POINTS, PROBLEMS, resubmission={"screen": False})
    rows = {r.contestant: r for r in fastest.standings(config, points_entries()).rows}
    assert rows["bob"].total == 18.0  # 8 on p1 + 10 on p2
    assert rows["carol"].total == 14.0  # 6 on p1 + 8 on p2


def test_default_points_table():
    entries = [entry(f"c{i}", "p1", 10.0 - i) for i in range(10)]
    result = fastest.standings(contest({"name": "fastest"}, ["p1"]), entries)
    assert [r.total for r in result.rows] == [10, 8, 6, 5, 4, 3, 2, 1, 0, 0]
    # 9th and 10th place on p1 are past the table: 0 points each, equal on every tie rule.
    assert [r.rank for r in result.rows] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 9]


def test_geomean_worked_example():
    config = contest(
        {"name": "fastest", "aggregation": "geomean", "floor": 0.5}, ["p1", "p2"], device_kinds=["H100", "A100"]
    )
    entries = [
        # ann: 4.0 and 2.0 on the H100, 0.25 on the A100 (below the floor: counts 0.5), p2 on
        # the A100 unsolved (0.5): (4 * 2 * 0.5 * 0.5) ** (1/4) = 2 ** (1/4), 3 solved.
        entry("ann", "p1", 4.0),
        entry("ann", "p2", 2.0),
        entry("ann", "p1", 0.25, device_kind="A100"),
        # ben: 2.0, 1.0, 1.0, 1.0: 2 ** (1/4) too, 4 solved: ahead by more problems solved.
        entry("ben", "p1", 2.0),
        entry("ben", "p2", 1.0),
        entry("ben", "p1", 1.0, device_kind="A100"),
        entry("ben", "p2", 1.0, device_kind="A100"),
        # cy solved nothing: every problem at the floor.
        entry("cy", "p1"),
        # not counted: before the start.
        entry("cy", "p1", 64.0, hours=-3),
    ]
    result = fastest.standings(config, entries)
    assert [(r.rank, r.contestant, r.tie_break) for r in result.rows] == [
        (1, "ben", None),
        (2, "ann", "more problems solved"),
        (3, "cy", None),
    ]
    assert [r.total for r in result.rows] == pytest.approx([2**0.25, 2**0.25, 0.5])
    ann = result.rows[1]
    assert ann.breakdown == {"p1@H100": 4.0, "p2@H100": 2.0, "p1@A100": 0.5}
    assert ann.figures == {"solved": 3}
    assert result.tie_rules == ["more problems solved"]


def test_geomean_uses_the_best_entry():
    config = contest({"name": "fastest", "aggregation": "geomean", "floor": 1.0}, ["p1"])
    entries = [entry("a", "p1", 2.0, hours=1), entry("a", "p1", 8.0, hours=2, score_low=7.0, score_high=9.0)]
    assert math.isclose(fastest.standings(config, entries).rows[0].total, 8.0)


@pytest.mark.parametrize(
    "rule, message",
    [
        ({"name": "fastest", "points": [10, 12, 6]}, "must not increase"),
        ({"name": "fastest", "points": [10, -1]}, "must not be negative"),
        ({"name": "fastest", "points": []}, "at least 1 item"),
        ({"name": "fastest", "aggregation": "median"}, "'points' or 'geomean'"),
        ({"name": "fastest", "floor": 0}, "greater than 0"),
        ({"name": "fastest", "p": [1.0]}, "Extra inputs are not permitted"),
    ],
)
def test_bad_fastest_config(rule, message):
    with pytest.raises(ValidationError, match=message):
        contest(rule, PROBLEMS)


def test_rule_checks_its_config():
    with pytest.raises(ValueError, match="not fastest"):
        fastest.standings(contest({"name": "fast_p"}, PROBLEMS), [])


def test_an_entry_an_organizer_rejected_never_counts():
    """`gpuarena contest review SLUG ID --reject` changed nothing in a `fastest` contest: the
    rejected entry (a copy, say) kept its points. A rejected entry is out of every rule's scope."""
    from gpuarena.contests import standings
    from gpuarena.contests.table import EntryTable

    entries = [
        entry("alice", "p1", 3.0, hours=1, accepted_by_organizer=False),  # rejected: a copy
        entry("alice", "p1", 1.5, hours=2),
        entry("bob", "p1", 2.0, hours=2),
    ]
    c = contest(POINTS, ["p1"])
    for given in (entries, EntryTable.from_entries(entries)):
        rows = {row.contestant: row.total for row in standings(c, given).rows}
        assert rows == {"bob": 10, "alice": 8}, rows
