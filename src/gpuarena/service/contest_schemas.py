"""What the contest API reads and writes: the contest file an organizer writes, entries with
their reviews, review requests and standings as the service shows them."""

from __future__ import annotations

import datetime as dt
import json
import tomllib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gpuarena.contests.model import BonusItem, Contest, Standings, as_utc
from gpuarena.errors import GpuarenaError


class Team(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=64)
    members: list[str] = Field(min_length=1)
    """User names."""


class ContestSpec(Contest):
    """A contest file (`gpuarena contest create contest.toml`, POST /api/contests): the scoring
    configuration plus what the service keeps beside it."""

    description: str = ""
    """Markdown, shown on the contest's page."""
    entries: Literal["individual", "team"] = "individual"
    """Individual entries, or team entries: a team is a named set of users and scores as one."""
    teams: list[Team] = Field(default_factory=list)
    organizers: list[str] = Field(default_factory=list)
    """User names who review; the creator is always one."""

    @model_validator(mode="after")
    def _teams(self) -> ContestSpec:
        if self.entries == "individual" and self.teams:
            raise ValueError("teams are given but entries is 'individual': set entries = \"team\"")
        names = [t.name for t in self.teams]
        if len(set(names)) != len(names):
            raise ValueError(f"team names must be unique: {names}")
        members = [m for t in self.teams for m in t.members]
        twice = sorted({m for m in members if members.count(m) > 1})
        if twice:
            raise ValueError(f"a user can be on one team only: {', '.join(twice)}")
        return self

    def scoring(self) -> Contest:
        """The part the scoring rules read."""
        return Contest.model_validate(self.model_dump(include=set(Contest.model_fields)))


class Schedule(BaseModel):
    """A contest's end moved by its organizers (PUT /api/contests/{slug}/schedule): extended, or
    brought forward, ending it now."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    end: dt.datetime | Literal["now"]
    """The new end (UTC; naive is read as UTC): "now" (the server's clock) or later."""
    freeze_from: dt.datetime | Literal["now"] | None = None
    """Where the freeze begins (never in the past: a freeze asked to begin earlier begins now);
    left out, the freeze keeps its length. A freeze that has begun stays where it began."""

    @field_validator("end", "freeze_from")
    @classmethod
    def _utc(cls, value: dt.datetime | str | None) -> dt.datetime | str | None:
        return as_utc(value) if isinstance(value, dt.datetime) else value

    def at(self, now: dt.datetime) -> tuple[dt.datetime, dt.datetime | None]:
        """The end and the freeze's start as times, "now" read as `now`."""
        end = now if self.end == "now" else self.end
        freeze = now if self.freeze_from == "now" else self.freeze_from
        return end, freeze


def parse_contest(text: str, fmt: Literal["toml", "json"] = "toml", where: str = "the contest file") -> ContestSpec:
    """A contest file's text, checked, with every mistake named by its field."""
    try:
        data = json.loads(text) if fmt == "json" else tomllib.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise GpuarenaError(f"{where}: not valid {fmt.upper()}: {exc}") from None
    try:
        return ContestSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in exc.errors())
        raise GpuarenaError(f"{where}: {problems}") from None


class ContestInfo(BaseModel):
    """A contest as listed: its configuration, organizers, and where it stands in time."""

    spec: ContestSpec
    phase: Literal["upcoming", "running", "frozen", "ended"]
    """frozen: running, with the public standings stopped at the freeze."""
    organizers: list[str]
    entries_count: int = 0
    warnings: list[str] = Field(default_factory=list)
    """On creation: what will not work yet, such as a device kind no runner has brought."""


class ReviewRequest(BaseModel):
    """An organizer's review of one contest entry. Only the figures given change."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    decision: Literal["accepted", "rejected", "pending"]
    comment: str = Field(default="", max_length=5000)
    """Shown to the contestant with the decision."""
    merged_upstream: bool | None = None
    """ccf-kernel: the work was merged upstream (+ the rule's merged points)."""
    bonus: list[BonusItem] | None = None
    """Bonus items awarded (tie breaks only): code_quality, performance_optimisation, write_up, llm_prompt."""
    samples_accepted: int | None = Field(default=None, ge=0)
    """ccf-dataset: accepted samples in this submission."""
    samples_score: float | None = Field(default=None, ge=0)
    judge_score: float | None = Field(default=None, ge=0, le=150)
    """ccf-migration: the judge's score (60 runs, 61-100 output match, up to +50 speed-up)."""
    completeness: float | None = Field(default=None, ge=0, le=1)

    @field_validator("bonus")
    @classmethod
    def _unique(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("bonus items must be unique")
        return value


class EntryOut(BaseModel):
    """A contest entry as its contestant and the organizers see it."""

    submission_id: int
    contestant: str
    user: str
    problem: str
    device_kind: str
    status: str
    score: float | None
    score_low: float | None
    score_high: float | None
    max_abs_error: float | None
    max_rel_error: float | None
    submitted_at: dt.datetime
    review: str
    review_comment: str
    reviewer: str | None
    merged_upstream: bool
    bonus: list[str]
    samples_accepted: int
    samples_score: float
    judge_score: float | None
    completeness: float | None
    flagged: bool = False
    """A resubmission that is not a real improvement: it does not count where the rule screens."""
    flag_reason: str = ""


class ProblemBest(BaseModel):
    """The best counted speed-up on one problem and device kind."""

    problem: str
    device_kind: str
    contestant: str | None = None
    score: float | None = None
    submission_id: int | None = None


class StandingsOut(BaseModel):
    """Standings as a viewer may see them."""

    standings: Standings
    frozen: bool
    """These are the public standings stopped at freeze_at (entries after it are hidden)."""
    live: bool
    """Every entry counted (an organizer's view during a freeze, or after it)."""
    computed_at: dt.datetime
    per_problem_best: list[ProblemBest] = Field(default_factory=list)
