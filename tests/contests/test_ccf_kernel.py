"""ccf-kernel: worked examples computed by hand (levels 1: 5, 2: 10, 3: 50, 4: 50; merged +50)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gpuarena.contests.rules import ccf_kernel

from .factory import at, contest, entry, table

PROBLEMS = ["k1", "k2", "k3", "k4", "k5"]
LEVELS = {"k1": 1, "k2": 2, "k3": 3, "k4": 4, "k5": 1}
RULE = {"name": "ccf-kernel"}


def accepted(contestant, problem, hours, **fields):
    """A passed, ranked entry on an H100 (speed-up 1.0) that the organizer accepted."""
    values = dict(level=LEVELS[problem], accepted_by_organizer=True)
    values.update(fields)
    return entry(contestant, problem, 1.0, hours=hours, **values)


def entries():
    return [
        # ann: k3 accepted (50) at h2, then merged (100) at h6 -> 100; k1 5 -> 105. Bonus: write_up
        # on both k3 entries counts once; the items on her rejected k2 never count.
        accepted("ann", "k3", 2, bonus=["write_up"]),
        accepted("ann", "k3", 6, merged_upstream=True, bonus=["write_up"]),
        accepted("ann", "k1", 3),
        accepted("ann", "k2", 4, accepted_by_organizer=False, bonus=["llm_prompt", "code_quality"]),
        # ann on another device kind: never counted.
        accepted("ann", "k4", 4, merged_upstream=True, device_kind="A100"),
        # bob: k4 merged (100) + k1 (5) = 105, 2 bonus items: above ann, whose bonus items give no points.
        accepted("bob", "k4", 2, merged_upstream=True, bonus=["code_quality"]),
        accepted("bob", "k1", 2, bonus=["write_up"]),
        accepted("bob", "k2", 3, mode="benchmark"),  # not ranked: never counted
        # cat: k2 (10) + k1 (5) = 15; k3 not reviewed yet, k4 rejected, k5 did not pass.
        accepted("cat", "k2", 1),
        accepted("cat", "k1", 1),
        accepted("cat", "k3", 1, accepted_by_organizer=None, merged_upstream=True),
        accepted("cat", "k4", 1, accepted_by_organizer=False),
        entry("cat", "k5", None, level=1, accepted_by_organizer=True),
        # eli: k1 at h1 (and again at h12: same points, the earlier counts) + k5 at h5 = 10,
        # 2 accepted problems, last counted at h5.
        accepted("eli", "k1", 1),
        accepted("eli", "k1", 12),
        accepted("eli", "k5", 5),
        # fay: k1 + k5 = 10, 2 accepted problems, last counted at h10: below eli.
        accepted("fay", "k1", 2),
        accepted("fay", "k5", 10),
        # dan: k2 accepted three times counts once: 10 with 1 accepted problem, below fay.
        accepted("dan", "k2", 1),
        accepted("dan", "k2", 2),
        accepted("dan", "k2", 3),
        # hal and ivy: k1 at the same time, nothing else: a shared place.
        accepted("hal", "k1", 3),
        accepted("ivy", "k1", 3),
        # kim: in scope but nothing accepted.
        accepted("kim", "k3", 3, accepted_by_organizer=None),
        # jon: before the start only: no row.
        accepted("jon", "k3", -1, merged_upstream=True),
    ]


def test_worked_example():
    result = ccf_kernel.standings(contest(RULE, PROBLEMS), entries())
    assert table(result) == [
        (1, "bob", 105.0, None),
        (2, "ann", 105.0, "more bonus items"),
        (3, "cat", 15.0, None),
        (4, "eli", 10.0, None),
        (5, "fay", 10.0, "earlier last counted submission"),
        (6, "dan", 10.0, "more accepted problems"),
        (7, "hal", 5.0, None),
        (7, "ivy", 5.0, None),
        (9, "kim", 0.0, None),
    ]
    rows = {r.contestant: r for r in result.rows}
    assert rows["ann"].breakdown == {"k3": 100.0, "k1": 5.0}
    assert rows["ann"].figures == {
        "bonus items": 1,
        "accepted problems": 2,
        "last counted submission": at(6).isoformat(),
    }
    assert rows["eli"].figures["last counted submission"] == at(5).isoformat()
    assert rows["dan"].figures == {
        "bonus items": 0,
        "accepted problems": 1,
        "last counted submission": at(1).isoformat(),
    }
    assert rows["kim"].figures == {"bonus items": 0, "accepted problems": 0}
    assert result.tie_rules == ["more bonus items", "more accepted problems", "earlier last counted submission"]


def test_screening_is_off_by_default_and_can_be_turned_on():
    # ann's merged k3 resubmission has the same speed-up as her first k3 entry: screened, it is
    # flagged and left out, and her k3 counts 50.
    config = contest(RULE, PROBLEMS, resubmission={"screen": True})
    rows = {r.contestant: r for r in ccf_kernel.standings(config, entries()).rows}
    assert rows["ann"].total == 55.0


def test_custom_points():
    config = contest({"name": "ccf-kernel", "level_points": {1: 1, 2: 2, 3: 3, 4: 4}, "merged_points": 0}, PROBLEMS)
    result = ccf_kernel.standings(config, [accepted("a", "k4", 1, merged_upstream=True), accepted("a", "k2", 1)])
    assert table(result) == [(1, "a", 6.0, None)]


@pytest.mark.parametrize(
    "rule, message",
    [
        ({"name": "ccf-kernel", "level_points": {1: 5, 2: 10, 3: 50}}, "levels 1, 2, 3 and 4; got \\[1, 2, 3\\]"),
        ({"name": "ccf-kernel", "level_points": {1: 5, 2: 10, 3: 50, 4: -1}}, "must not be negative"),
        ({"name": "ccf-kernel", "merged_points": -5}, "greater than or equal to 0"),
        ({"name": "ccf-kernel", "bonus_points": 5}, "Extra inputs are not permitted"),
    ],
)
def test_bad_ccf_kernel_config(rule, message):
    with pytest.raises(ValidationError, match=message):
        contest(rule, PROBLEMS)
