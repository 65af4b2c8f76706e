"""ccf-migration: worked examples computed by hand."""

from __future__ import annotations

from gpuarena.contests.rules import ccf_migration

from .factory import contest, entry, table

PROBLEMS = ["m1", "m2"]


def judged(contestant, problem, judge, speed_up=None, completeness=None, **fields):
    return entry(contestant, problem, speed_up, judge_score=judge, completeness=completeness, **fields)


def test_worked_example():
    entries = [
        # ann: 120 and 130; only the best counts (130 on m2, speed-up 1.5, completeness 1.0).
        judged("ann", "m1", 120, 2.0, 0.9, hours=1),
        judged("ann", "m2", 130, 1.5, 1.0, hours=2),
        judged("ann", "m9", 140, 9.0, 1.0),  # not in the contest
        # bob: two entries judged 130; the one with the larger speed-up is his best (3.0, 0.5).
        judged("bob", "m1", 130, 3.0, 0.5, hours=1),
        judged("bob", "m1", 130, 2.0, 1.0, hours=2),
        # cal: 130 with speed-up 3.0 and completeness 0.8: above bob on completeness.
        judged("cal", "m2", 130, 3.0, 0.8),
        # dee and eli: 60 (it runs, outputs do not match, no speed-up): a shared place.
        judged("dee", "m1", 60),
        judged("eli", "m2", 60),
        # fox: 80 and 75; entries before the start and on another device kind never count.
        judged("fox", "m1", 80, 1.1, 0.5),
        judged("fox", "m1", 75, 1.2, 0.6),
        judged("fox", "m1", 150, 5.0, 1.0, hours=-1),
        judged("fox", "m2", 149, 5.0, 1.0, device_kind="A100"),
        # gus: not judged yet.
        judged("gus", "m1", None),
    ]
    result = ccf_migration.standings(contest({"name": "ccf-migration"}, PROBLEMS), entries)
    assert table(result) == [
        (1, "cal", 130.0, None),
        (2, "bob", 130.0, "larger completeness"),
        (3, "ann", 130.0, "larger speed-up"),
        (4, "fox", 80.0, None),
        (5, "dee", 60.0, None),
        (5, "eli", 60.0, None),
        (7, "gus", 0.0, None),
    ]
    rows = {r.contestant: r for r in result.rows}
    assert rows["ann"].breakdown == {"m2": 130.0}
    assert rows["bob"].figures == {"best submission": entries[3].submission_id, "speed-up": 3.0, "completeness": 0.5}
    assert rows["gus"].breakdown == {}
    assert result.tie_rules == ["larger speed-up", "larger completeness"]


def test_equal_best_entries_prefer_the_earlier():
    first = judged("a", "m1", 100, 2.0, 1.0, hours=1)
    later = judged("a", "m2", 100, 2.0, 1.0, hours=2)
    result = ccf_migration.standings(contest({"name": "ccf-migration"}, PROBLEMS), [later, first])
    assert result.rows[0].figures["best submission"] == first.submission_id
