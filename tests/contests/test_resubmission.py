"""Resubmission screening and which entries a contest counts."""

from __future__ import annotations

import random

import pytest

from gpuarena.contests.eligibility import before_freeze, best_counted, board_key, counted, in_scope, scoped
from gpuarena.contests.model import ResubmissionPolicy
from gpuarena.contests.resubmission import flag_resubmissions, flagged_ids

from .factory import at, contest, entry


def flagged(entries, **policy):
    flags = flag_resubmissions(entries, ResubmissionPolicy(**policy))
    return [flags[e.submission_id].flagged for e in entries]


def test_honest_improvement_is_not_flagged():
    first = entry("a", "p1", 2.0, hours=1, score_low=1.9, score_high=2.1, max_abs_error=1e-3)
    better = entry("a", "p1", 2.5, hours=2, score_low=2.3, score_high=2.7, max_abs_error=1e-3)
    flags = flag_resubmissions([first, better])
    assert flags[better.submission_id].flagged is False
    assert flags[better.submission_id].reason is None
    assert flags[first.submission_id].flagged is False


def test_equal_within_the_interval_is_flagged():
    first = entry("a", "p1", 2.0, hours=1, score_low=1.9, score_high=2.1)
    again = entry("a", "p1", 2.05, hours=2, score_low=1.95, score_high=2.15)
    flag = flag_resubmissions([first, again])[again.submission_id]
    assert flag.flagged and flag.codes == ["not-above-best"]
    assert flag.previous_best == first.submission_id
    assert flag.reason == (
        f"speed-up 2.05x (interval 1.95-2.15) does not clear your best so far, 2x "
        f"(submission {first.submission_id}): a resubmission counts when the low end of "
        f"its interval is above your best"
    )


def test_low_end_equal_to_the_best_is_flagged():
    assert flagged([entry("a", "p1", 2.0, hours=1), entry("a", "p1", 2.4, hours=2, score_low=2.0)]) == [False, True]


def test_worse_precision_is_flagged():
    first = entry("a", "p1", 2.0, hours=1, max_abs_error=1e-3, max_rel_error=1e-4)
    faster = entry("a", "p1", 3.0, hours=2, score_low=2.8, score_high=3.2, max_abs_error=1e-2, max_rel_error=1e-4)
    flag = flag_resubmissions([first, faster])[faster.submission_id]
    assert flag.flagged and flag.codes == ["larger-error"]
    assert "max absolute error 0.01 is larger than that of your best so far, 0.001" in flag.reason
    # Both reasons at once.
    both = entry("a", "p1", 2.0, hours=3, max_rel_error=1e-3)
    assert flag_resubmissions([first, both])[both.submission_id].codes == ["not-above-best", "larger-error"]
    # A tolerance for run-to-run variation of the errors: ten times is within twenty.
    assert flagged([first, faster], error_factor=20) == [False, False]


def test_flagged_entries_never_become_the_best():
    # 2.1 (low 1.9) does not clear 2.0; 2.2 (low 2.05) clears 2.0, the best that counts, though not 2.1.
    entries = [
        entry("a", "p1", 2.0, hours=1),
        entry("a", "p1", 2.1, hours=2, score_low=1.9),
        entry("a", "p1", 2.2, hours=3, score_low=2.05),
    ]
    assert flagged(entries) == [False, True, False]


def test_without_an_interval_the_score_itself_must_clear_the_best():
    entries = [entry("a", "p1", 2.0, hours=1), entry("a", "p1", 2.0, hours=2), entry("a", "p1", 2.01, hours=3)]
    assert flagged(entries) == [False, True, False]


def test_submission_order_not_input_order():
    late, early = entry("a", "p1", 2.0, hours=5), entry("a", "p1", 3.0, hours=1)
    assert flagged([late, early]) == [True, False]


def test_groups_are_contestant_problem_and_device_kind():
    entries = [
        entry("a", "p1", 2.0),
        entry("b", "p1", 2.0),
        entry("a", "p2", 2.0),
        entry("a", "p1", 2.0, device_kind="A100"),
    ]
    assert flagged(entries) == [False] * 4


def test_failures_are_never_flagged_and_set_no_best():
    entries = [
        entry("a", "p1", None, hours=1),
        entry("a", "p1", 2.0, hours=2, status="WRONG_VALUES"),
        entry("a", "p1", 1.0, hours=3),
        entry("a", "p1", None, hours=4),
    ]
    assert flagged(entries) == [False, False, False, False]
    assert flagged_ids(entries) == set()


def test_only_entries_in_scope_set_a_best():
    # A 5.0 before the contest, and one in test mode, set no best: the 2.0 in the contest counts.
    config = contest({"name": "fastest"}, ["p1"])
    entries = [
        entry("a", "p1", 5.0, hours=-1),
        entry("a", "p1", 6.0, hours=1, mode="test"),
        entry("a", "p1", 2.0, hours=2),
    ]
    assert list(counted(config, entries, screen_by_default=True)) == [entries[2]]


def test_scope():
    config = contest({"name": "fastest"}, ["p1"])
    inside = [entry("a", "p1", 1.0, hours=0), entry("a", "p1", 1.0, hours=47.99)]
    outside = [
        entry("a", "p1", 1.0, hours=-0.01),
        entry("a", "p1", 1.0, hours=48),
        entry("a", "p1", 1.0, mode="benchmark"),
        entry("a", "p1", 1.0, device_kind="A100"),
        entry("a", "p2", 1.0),
    ]
    assert [in_scope(config, e) for e in inside + outside] == [True] * 2 + [False] * 5
    assert scoped(config, inside + outside) == inside


def test_screening_follows_the_contest_then_the_rule():
    entries = [entry("a", "p1", 2.0, hours=1), entry("a", "p1", 2.0, hours=2)]
    default = contest({"name": "fastest"}, ["p1"])
    assert len(list(counted(default, entries, screen_by_default=True))) == 1
    assert len(list(counted(default, entries, screen_by_default=False))) == 2
    off = contest({"name": "fastest"}, ["p1"], resubmission={"screen": False})
    assert len(list(counted(off, entries, screen_by_default=True))) == 2
    on = contest({"name": "fastest"}, ["p1"], resubmission={"screen": True})
    assert len(list(counted(on, entries, screen_by_default=False))) == 1


def test_before_freeze():
    config = contest({"name": "fastest"}, ["p1"], freeze_hours=6)
    assert config.freeze_at == at(42)
    entries = [entry("a", "p1", 1.0, hours=41.9), entry("a", "p1", 1.0, hours=42)]
    assert before_freeze(config, entries) == entries[:1]


@pytest.mark.parametrize("screen", [True, False])
def test_best_counted_agrees_with_counted(screen):
    """The one-pass index of the speed-ranked rules picks the same entries as counting first."""
    rng = random.Random(7)
    config = contest({"name": "fastest"}, ["p1", "p2"], device_kinds=["H100", "A100"], resubmission={"screen": screen})
    entries = []
    for _ in range(3000):
        score = rng.choice([None, round(rng.uniform(0.5, 3), 1)])
        low = round(score - rng.choice([0, 0.1, 0.3]), 2) if score else None
        entries.append(
            entry(
                rng.choice("abcdefgh"),
                rng.choice(["p1", "p2", "p9"]),
                score,
                hours=round(rng.uniform(-2, 50), 1),
                device_kind=rng.choice(["H100", "A100", "L4"]),
                mode=rng.choice(["ranked"] * 5 + ["test"]),
                score_low=low if low and low > 0 else None,
            )
        )
    expected: dict[str, dict[str, object]] = {}
    for e in counted(config, entries, screen_by_default=True):
        mine = expected.setdefault(e.contestant, {})
        if e.status == "PASSED":
            key = board_key(e.problem, e.device_kind)
            mine[key] = min([e, mine.get(key, e)], key=lambda x: (-x.score, x.submitted_at, x.submission_id))
    bests = best_counted(config, entries, screen_by_default=True)
    assert bests.entries == expected
    assert bests.scores == {c: {k: e.score for k, e in m.items()} for c, m in expected.items()}
    boards = {key: dict(zip(board.contestants, board.scores)) for key, board in bests.boards.items()}
    assert boards == {
        k: {c: m[k].score for c, m in expected.items() if k in m} for k in {k for m in expected.values() for k in m}
    }
