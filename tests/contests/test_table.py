"""The column path (table.py, columnar.py, each rule's _from_table) gives the same standings as
the entry path, whose semantics the worked examples fix: random contests with a fixed seed,
drawn to hit ties (few speed-ups and times), screened resubmissions, missing figures and
entries out of scope."""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pytest

from gpuarena.contests import standings
from gpuarena.contests.model import BONUS_ITEMS, Entry, Standings
from gpuarena.contests.table import COLUMNS, EntryTable, as_datetime, micros

from .factory import T0, at, contest
from .test_fastest import points_entries

RULES = [
    {"name": "fastest"},
    {"name": "fastest", "points": [10, 8, 6]},
    {"name": "fastest", "points": [3.5, 0.1]},
    {"name": "fastest", "aggregation": "geomean"},
    {"name": "fastest", "aggregation": "geomean", "floor": 1.5},
    {"name": "fast_p"},
    {"name": "fast_p", "p": [1.5, 0.0]},
    {"name": "ccf-kernel"},
    {"name": "ccf-kernel", "level_points": {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.7}, "merged_points": 0.3},
    {"name": "ccf-dataset"},
    {"name": "ccf-migration"},
]
POLICIES = [
    {},
    {"resubmission": {"screen": True}},
    {"resubmission": {"screen": False}},
    {"resubmission": {"screen": True, "error_factor": 1.5}},
]
PROBLEMS = ["p1", "p2", "p3", "p4"]


def canonical(s: Standings) -> list:
    """Rows with every value's type, breakdowns and figures as sorted items: equal standings
    are equal here, and an int where a float belongs is not."""

    def typed(v):
        return type(v).__name__, v

    return [s.contest, s.rule, s.tie_rules] + [
        (
            r.rank,
            r.contestant,
            typed(r.total),
            r.tie_break,
            sorted((k, typed(v)) for k, v in r.breakdown.items()),
            sorted((k, typed(v)) for k, v in r.figures.items()),
        )
        for r in s.rows
    ]


def random_entries(rng: random.Random, n: int) -> list[Entry]:
    contestants = [f"c{i}" for i in range(rng.randint(1, 12))]
    speeds = [0.5, 1.0, 1.5, 2.0, 2.0001, 3.0]
    entries = []
    for sid in rng.sample(range(1, 10 * n), n):
        passed = rng.random() < 0.75
        score = rng.choice(speeds) if passed else None
        half = rng.choice((None, 0.0, 0.01, 0.6)) if score else None
        errors = [rng.choice((None, 1e-4, 2e-4, 3e-4)) for _ in range(2)]
        fields = dict(
            submission_id=sid,
            contestant=rng.choice(contestants),
            problem=rng.choice(PROBLEMS + ["other"]),
            level=rng.randint(1, 4),
            device_kind=rng.choice(("H100", "H100", "B200", "A100")),
            status="PASSED" if passed or rng.random() < 0.1 else rng.choice(("WRONG_VALUES", "TIMEOUT")),
            mode=rng.choice(("ranked",) * 8 + ("test", "benchmark")),
            score=score,
            score_low=score - half if half is not None and score - half > 0 else None,
            score_high=score + half if half is not None else None,
            max_abs_error=errors[0],
            max_rel_error=errors[1],
            submitted_at=at(rng.choice((-1, 0, 1, 1, 2, 3, 3.5, 47.999, 48, 50))),
            accepted_by_organizer=rng.choice((True, True, False, None)),
            merged_upstream=rng.random() < 0.3,
            bonus=rng.sample(BONUS_ITEMS, rng.choice((0, 0, 1, 2))),
            samples_accepted=rng.choice((0, 0, 1, 3)),
            samples_score=rng.choice((0.0, 0.1, 0.2, 1.5)),
            judge_score=rng.choice((None, 60.0, 80.5, 80.5, 150.0)),
            completeness=rng.choice((None, 0.5, 1.0)),
        )
        entries.append(Entry(**fields))
    return entries


@pytest.mark.parametrize("seed", range(40))
def test_columns_give_the_standings_entries_give(seed: int) -> None:
    rng = random.Random(seed)
    entries = random_entries(rng, rng.choice((0, 1, 5, 30, 120)))
    shuffled = rng.sample(entries, len(entries))
    for rule in RULES:
        for policy in POLICIES:
            c = contest(rule, PROBLEMS, device_kinds=["H100", "B200"], **policy)
            expected = canonical(standings(c, entries))
            assert canonical(standings(c, EntryTable.from_entries(shuffled))) == expected, (rule, policy)


def test_the_worked_fastest_example_from_columns() -> None:
    c = contest({"name": "fastest", "points": [10, 8, 6]}, PROBLEMS)
    entries = points_entries()
    assert canonical(standings(c, EntryTable.from_entries(entries))) == canonical(standings(c, entries))


def test_a_table_upserted_row_by_row_is_the_table_built_at_once() -> None:
    """The service's path: rows replaced and added in place, then the rule run again."""
    rng = random.Random(7)
    entries = random_entries(rng, 200)
    table = EntryTable.from_entries(entries[:150])
    changed = [
        e.model_copy(
            update={
                "score": 2.5,
                "status": "PASSED",
                "score_low": None,
                "score_high": None,
                "accepted_by_organizer": True,
            }
        )
        for e in entries[100:120]
    ]
    final = entries[:100] + changed + entries[120:]
    table.upsert({name: [e.__dict__[name] for e in changed] for name in COLUMNS})
    table.upsert({name: [e.__dict__[name] for e in entries[150:]] for name in COLUMNS})
    assert len(table) == 200
    for rule in RULES:
        c = contest(rule, PROBLEMS, device_kinds=["H100", "B200"])
        assert canonical(standings(c, table)) == canonical(standings(c, final))


def test_times_are_exact_microseconds_from_any_form() -> None:
    when = T0 + dt.timedelta(microseconds=123457)
    naive = when.replace(tzinfo=None)
    assert micros(when) == micros(naive) == micros(str(naive)) == micros(naive.isoformat())
    assert as_datetime(micros(when)) == when
    rows = [
        (
            1,
            "a",
            "p1",
            1,
            "H100",
            "PASSED",
            "ranked",
            2.0,
            None,
            None,
            None,
            None,
            str(naive),
            None,
            0,
            '["write_up"]',
            0,
            0.0,
            None,
            None,
        ),
        (
            2,
            "a",
            "p1",
            1,
            "H100",
            "TIMEOUT",
            "ranked",
            3.0,
            2.9,
            3.1,
            None,
            None,
            naive,
            True,
            1,
            "[]",
            0,
            0.0,
            None,
            None,
        ),
    ]
    table = EntryTable.from_rows(rows, failed_scores=False)
    assert table.submitted_at.tolist() == [micros(when)] * 2
    assert np.isnan(table.score[1]) and table.passed.tolist() == [True, False]
    assert table.bonus.tolist() == [1 << BONUS_ITEMS.index("write_up"), 0] and table.accepted.tolist() == [-1, 1]
