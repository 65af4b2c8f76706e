"""The records: bad configurations and entries fail with clear messages; datetimes are UTC."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from gpuarena.contests import RULES, standings
from gpuarena.contests.model import BONUS_ITEMS, RULE_NAMES, Contest, FastestRule

from .factory import T0, at, contest, entry


def test_end_must_follow_start():
    with pytest.raises(ValidationError, match="the contest must end after it starts: end 2026-12-01T07:00:00"):
        contest({"name": "fastest"}, ["p1"], end=at(-1))
    with pytest.raises(ValidationError, match="must end after it starts"):
        contest({"name": "fastest"}, ["p1"], end=T0)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"problems": []}, "problems\n  List should have at least 1 item"),
        ({"problems": ["p1", "p2", "p1"]}, "problems must be unique; repeated: p1"),
        ({"device_kinds": ["H100", "H100"]}, "device_kinds must be unique; repeated: H100"),
        ({"slug": "Not A Slug"}, "slug\n  String should match pattern"),
        ({"freeze_hours": 49}, "freeze_hours \\(49\\) is longer than the contest \\(48 hours\\)"),
        ({"daily_submission_limit": 0}, "greater than 0"),
        ({"rule": {"name": "fastestt"}}, "does not match any of the expected tags: 'fastest', 'fast_p', 'ccf-kernel'"),
        ({"rule": {"points": [1]}}, "Unable to extract tag using discriminator 'name'"),
        ({"rules": {"name": "fastest"}}, "rules\n  Extra inputs are not permitted"),
        ({"resubmission": {"error_factor": 0.5}}, "greater than or equal to 1"),
    ],
)
def test_bad_contest_config(fields, message):
    values = {"problems": ["p1"], **fields}
    rule = values.pop("rule", {"name": "fastest"})
    with pytest.raises(ValidationError, match=message):
        contest(rule, **values)


def test_contest_from_json_and_utc():
    config = Contest.model_validate_json("""{
        "slug": "ccf-2026", "title": "CCF 2026", "start": "2026-12-01T16:00:00+08:00",
        "end": "2026-12-03T08:00:00", "problems": ["level1/softmax"], "device_kinds": ["H100"],
        "rule": {"name": "fastest", "aggregation": "geomean", "floor": 0.2}, "freeze_hours": 4,
        "daily_submission_limit": 20}""")
    assert config.start == T0  # 16:00 at +08:00 is 08:00 UTC
    assert config.end == at(48)  # naive: read as UTC
    assert config.end.tzinfo == dt.UTC
    assert config.freeze_at == at(44)
    assert isinstance(config.rule, FastestRule) and config.rule.floor == 0.2


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"bonus": ["write_up", "charm"]}, "'code_quality', 'performance_optimisation', 'write_up' or 'llm_prompt'"),
        ({"bonus": ["write_up", "write_up"]}, "bonus items must be unique; repeated: write_up"),
        ({"score_low": 2.5}, "score_low \\(2.5\\) is above the score \\(2.0\\)"),
        ({"score_high": 1.5}, "score_high \\(1.5\\) is below the score \\(2.0\\)"),
        ({"score": None, "score_low": 3.0, "score_high": 2.0}, "score_low \\(3.0\\) is above score_high \\(2.0\\)"),
        ({"score": -1.0}, "greater than 0"),
        ({"level": 5}, "Input should be 1, 2, 3 or 4"),
        ({"mode": "practice"}, "'test', 'benchmark' or 'ranked'"),
        ({"judge_score": 151}, "less than or equal to 150"),
        ({"completeness": 1.5}, "less than or equal to 1"),
        ({"samples_accepted": -1}, "greater than or equal to 0"),
        ({"team": "x"}, "Extra inputs are not permitted"),
    ],
)
def test_bad_entry(fields, message):
    with pytest.raises(ValidationError, match=message):
        entry("a", "p1", **{"score": 2.0, **fields})


def test_entries_are_frozen_and_utc():
    e = entry("a", "p1", 2.0, submitted_at=dt.datetime(2026, 12, 1, 9, 0))
    assert e.submitted_at == at(1)
    with pytest.raises(ValidationError, match="frozen"):
        e.score = 3.0
    assert BONUS_ITEMS == ("code_quality", "performance_optimisation", "write_up", "llm_prompt")


def test_registry_covers_every_rule():
    assert tuple(RULES) == RULE_NAMES
    tags = {arg.model_fields["name"].annotation.__args__[0] for arg in Contest.model_fields["rule"].annotation.__args__}
    assert tags == set(RULE_NAMES)


@pytest.mark.parametrize("name", RULE_NAMES)
def test_dispatch_by_name(name):
    config = contest({"name": name}, ["p1"])
    result = standings(config, [entry("a", "p1", 2.0, accepted_by_organizer=True, judge_score=70, samples_accepted=1)])
    assert result.rule == name
    assert [(r.rank, r.contestant) for r in result.rows] == [(1, "a")]
    assert standings(config, []).rows == []


def test_a_trusted_entry_equals_a_validated_one_and_needs_every_field() -> None:
    import datetime as dt

    import pytest

    from gpuarena.contests.model import Entry

    fields = dict(
        submission_id=1,
        contestant="alice",
        problem="level1/softmax",
        level=1,
        device_kind="H100",
        status="PASSED",
        mode="ranked",
        score=2.0,
        score_low=1.9,
        score_high=2.1,
        max_abs_error=1e-4,
        max_rel_error=1e-3,
        submitted_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
        accepted_by_organizer=None,
        merged_upstream=False,
        bonus=[],
        samples_accepted=0,
        samples_score=0.0,
        judge_score=None,
        completeness=None,
    )
    trusted = Entry.trusted(dict(fields))
    assert trusted == Entry.model_validate(fields) and trusted.passed
    assert trusted.model_dump() == Entry.model_validate(fields).model_dump()
    with pytest.raises(ValueError, match="missing: \\['completeness'\\]"):
        Entry.trusted({k: v for k, v in fields.items() if k != "completeness"})
