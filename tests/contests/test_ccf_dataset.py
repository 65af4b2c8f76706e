"""ccf-dataset: worked examples computed by hand."""

from __future__ import annotations

from gpuarena.contests.rules import ccf_dataset

from .factory import contest, entry, table

PROBLEMS = ["d1", "d2"]


def samples(contestant, problem, count, score, **fields):
    return entry(contestant, problem, 1.0, samples_accepted=count, samples_score=score, **fields)


def test_worked_example():
    entries = [
        # cid, ben, amy: 50 samples each. cid's score 120; ben 110 with 2 bonus items; amy 110
        # (60 + 50) with 1.
        samples("cid", "d1", 50, 120),
        samples("ben", "d1", 50, 110, bonus=["code_quality", "write_up"]),
        samples("amy", "d1", 30, 60, bonus=["write_up"]),
        samples("amy", "d2", 20, 50),
        # dot and eva: 10 samples, score 20, 1 bonus item: a shared place. dot's items on a
        # submission with no accepted sample do not count.
        samples("dot", "d1", 10, 20, bonus=["write_up"]),
        samples("dot", "d2", 0, 0, bonus=["llm_prompt", "code_quality"]),
        samples("eva", "d2", 10, 20, bonus=["write_up"]),
        # fin: nothing accepted.
        samples("fin", "d1", 0, 0),
        # Never counted: before the start, another device kind, test mode, not in the contest.
        samples("amy", "d1", 100, 100, hours=-1),
        samples("ben", "d1", 100, 100, device_kind="A100"),
        samples("cid", "d2", 100, 100, mode="test"),
        samples("dot", "d9", 100, 100),
    ]
    result = ccf_dataset.standings(contest({"name": "ccf-dataset"}, PROBLEMS), entries)
    assert table(result) == [
        (1, "cid", 50.0, None),
        (2, "ben", 50.0, "higher total sample score"),
        (3, "amy", 50.0, "more bonus items"),
        (4, "dot", 10.0, None),
        (4, "eva", 10.0, None),
        (6, "fin", 0.0, None),
    ]
    rows = {r.contestant: r for r in result.rows}
    assert rows["amy"].breakdown == {"d1": 30.0, "d2": 20.0}
    assert rows["amy"].figures == {"samples": 50, "sample score": 110.0, "bonus items": 1}
    assert rows["dot"].figures["bonus items"] == 1
    assert result.tie_rules == ["higher total sample score", "more bonus items"]


def test_samples_add_up_over_submissions():
    entries = [samples("a", "d1", 3, 1.5, hours=1), samples("a", "d1", 4, 2.5, hours=2)]
    result = ccf_dataset.standings(contest({"name": "ccf-dataset"}, PROBLEMS), entries)
    assert table(result) == [(1, "a", 7.0, None)]
    assert result.rows[0].figures["sample score"] == 4.0
