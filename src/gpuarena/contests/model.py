"""The records contest scoring reads and writes: judged entries, a contest's configuration and
its standings. Pure data: the service builds entries from its tables and stores standings."""

from __future__ import annotations

import datetime as dt
import sys
from collections import Counter
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PASSED = "PASSED"
RANKED = "ranked"

BonusItem = Literal["code_quality", "performance_optimisation", "write_up", "llm_prompt"]
"""What an organizer may award a bonus item for: never points, only a tie break."""
BONUS_ITEMS: tuple[str, ...] = get_args(BonusItem)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


def as_utc(value: dt.datetime) -> dt.datetime:
    """Aware UTC datetimes; a naive one is read as UTC, as the service's tables store them."""
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    return value.astimezone(dt.UTC)


MAX_PROBLEMS = 2000
"""Problems in one contest: the whole dataset (366) several times over."""
MAX_DEVICE_KINDS = 64


def _unique(values: list, what: str) -> list:
    """values, or a ValueError naming the repeated ones: in one pass (a count per value was
    quadratic, and 20,000 problem ids held the server's event loop for 30 s)."""
    repeated = sorted(str(v) for v, n in Counter(values).items() if n > 1)
    if repeated:
        shown = ", ".join(repeated[:20]) + (f" and {len(repeated) - 20} more" if len(repeated) > 20 else "")
        raise ValueError(f"{what} must be unique; repeated: {shown}")
    return values


class Entry(Strict):
    """One judged submission, as a rule sees it."""

    submission_id: int
    contestant: str = Field(min_length=1)
    """The user or team the submission counts for."""
    problem: str = Field(min_length=1)
    """Problem id, e.g. level1/softmax."""
    level: Literal[1, 2, 3, 4]
    """The problem's level (ccf-kernel's base score reads it)."""
    device_kind: str = Field(min_length=1)
    """The device kind it was judged on, e.g. H100."""
    status: str
    """The verdict: PASSED or the failure (WRONG_VALUES, TIMEOUT, ...)."""
    mode: Literal["test", "benchmark", "ranked"]
    """Only ranked runs (secret seed) count in a contest."""
    score: float | None = Field(default=None, gt=0)
    """Speed-up over the reference (point estimate); None when the run did not pass."""
    score_low: float | None = Field(default=None, gt=0)
    """Low end of the speed-up's confidence interval."""
    score_high: float | None = Field(default=None, gt=0)
    """High end of the speed-up's confidence interval."""
    max_abs_error: float | None = Field(default=None, ge=0)
    """Largest elementwise |out - ref| over the checked calls, where the harness gives it."""
    max_rel_error: float | None = Field(default=None, ge=0)
    """Largest elementwise relative error, where the harness gives it."""
    submitted_at: dt.datetime
    """When it was submitted (UTC; a naive datetime is read as UTC)."""
    accepted_by_organizer: bool | None = None
    """The organizer's review: True accepted, False rejected, None not reviewed yet."""
    merged_upstream: bool = False
    """The contribution was merged into the upstream project (ccf-kernel: +50)."""
    bonus: list[BonusItem] = Field(default_factory=list)
    """Bonus items the organizer awarded this submission; tie breaks only."""
    samples_accepted: int = Field(default=0, ge=0)
    """ccf-dataset: how many of the submitted samples the organizer accepted."""
    samples_score: float = Field(default=0.0, ge=0)
    """ccf-dataset: the accepted samples' total score."""
    judge_score: float | None = Field(default=None, ge=0, le=150)
    """ccf-migration: the judge's figure (60 runs, 61-100 by output match, up to +50 for speed-up)."""
    completeness: float | None = Field(default=None, ge=0, le=1)
    """ccf-migration: share of the migration done (0-1), the last tie break."""

    @field_validator("submitted_at")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return as_utc(value)

    @field_validator("contestant", "problem", "device_kind", "status")
    @classmethod
    def _interned(cls, value: str) -> str:
        """A contest has hundreds of thousands of entries naming a few thousand contestants and
        a few dozen problems: one string object per name saves memory, and the rules' dict
        look-ups by name become identity checks (bench/standings.py)."""
        return sys.intern(value)

    @field_validator("bonus")
    @classmethod
    def _unique_bonus(cls, value: list[str]) -> list[str]:
        return _unique(value, "bonus items")

    @model_validator(mode="after")
    def _interval(self) -> Entry:
        low, high = self.score_low, self.score_high
        if low is not None and high is not None and low > high:
            raise ValueError(f"score_low ({low}) is above score_high ({high})")
        if self.score is not None:
            if low is not None and low > self.score:
                raise ValueError(f"score_low ({low}) is above the score ({self.score})")
            if high is not None and high < self.score:
                raise ValueError(f"score_high ({high}) is below the score ({self.score})")
        return self

    @classmethod
    def trusted(cls, fields: dict) -> Entry:
        """An entry from fields already checked (the service's own tables), every field given:
        what model_construct does, without its per-field default handling, which costs 30 µs
        an entry: a standings read of a large contest builds hundreds of thousands."""
        return _trusted(cls, fields, _ENTRY_FIELDS)

    @property
    def passed(self) -> bool:
        """Passed with a speed-up: what the speed-ranked rules read."""
        return self.status == PASSED and self.score is not None


def _trusted(cls: type[Strict], fields: dict, names: frozenset[str]) -> Any:
    if len(fields) != len(names):
        raise ValueError(f"{cls.__name__}.trusted needs every field; missing: {sorted(names - set(fields))}")
    record = cls.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    object.__setattr__(record, "__pydantic_fields_set__", names)
    object.__setattr__(record, "__pydantic_extra__", None)
    object.__setattr__(record, "__pydantic_private__", None)
    return record


_ENTRY_FIELDS = frozenset(Entry.model_fields)


_DEFAULT_POINTS: list[float] = [10, 8, 6, 5, 4, 3, 2, 1]
"""fastest's points by place (a fresh copy per rule)."""


class FastestRule(Strict):
    """GPU MODE style: per problem and device kind, contestants ranked by their best speed-up."""

    name: Literal["fastest"]
    aggregation: Literal["points", "geomean"] = "points"
    """points: sum over problems of points by place; geomean: geometric mean of best speed-ups."""
    points: list[float] = Field(default_factory=lambda: _DEFAULT_POINTS.copy(), min_length=1)
    """Points for 1st, 2nd, ... place on a problem; places past the table get 0."""
    floor: float = Field(default=0.1, gt=0)
    """geomean: the speed-up an unsolved problem counts as; a solved problem counts as at least
    this much too, so that submitting a slow solution never lowers a contestant's mean."""

    @field_validator("points")
    @classmethod
    def _descending(cls, value: list[float]) -> list[float]:
        if any(p < 0 for p in value):
            raise ValueError("points must not be negative")
        if any(a < b for a, b in zip(value, value[1:])):
            raise ValueError(f"points must not increase from one place to the next: {value}")
        return value


class FastPRule(Strict):
    """KernelBench style: the share of problems solved with a speed-up above p."""

    name: Literal["fast_p"]
    p: list[float] = Field(default_factory=lambda: [0.0, 1.0, 2.0], min_length=1)
    """Thresholds; ranked by fast_p of the first, ties by the next, and so on."""

    @field_validator("p")
    @classmethod
    def _thresholds(cls, value: list[float]) -> list[float]:
        if any(p < 0 for p in value):
            raise ValueError("p values are speed-ups and must not be negative")
        return _unique(value, "p values")


class CcfKernelRule(Strict):
    """Operators contributed upstream: points by level for each accepted problem."""

    name: Literal["ccf-kernel"]
    level_points: dict[int, float] = Field(default_factory=lambda: {1: 5.0, 2: 10.0, 3: 50.0, 4: 50.0})
    """Base points of an accepted problem, by level (defaults are floats, as validated values
    are: a default is not validated, and an int would show as one in the breakdowns)."""
    merged_points: float = Field(default=50.0, ge=0)
    """Added when the contribution was merged upstream."""

    @field_validator("level_points")
    @classmethod
    def _all_levels(cls, value: dict[int, float]) -> dict[int, float]:
        if set(value) != {1, 2, 3, 4}:
            raise ValueError(f"level_points must give points for levels 1, 2, 3 and 4; got {sorted(value)}")
        if any(p < 0 for p in value.values()):
            raise ValueError("level_points must not be negative")
        return value


class CcfDatasetRule(Strict):
    """Dataset contributions: ranked by accepted samples, then their score, then bonus items."""

    name: Literal["ccf-dataset"]


class CcfMigrationRule(Strict):
    """Migrations: each contestant's best judge score, ties by speed-up then completeness."""

    name: Literal["ccf-migration"]


Rule = Annotated[
    FastestRule | FastPRule | CcfKernelRule | CcfDatasetRule | CcfMigrationRule, Field(discriminator="name")
]
RULE_NAMES: tuple[str, ...] = ("fastest", "fast_p", "ccf-kernel", "ccf-dataset", "ccf-migration")


class ResubmissionPolicy(Strict):
    """When a resubmission is flagged as not a real improvement (resubmission.py)."""

    screen: bool | None = None
    """Leave flagged entries out of the standings; None: the rule's default (on for the
    speed-ranked rules fastest and fast_p, off for the ccf rules, whose scores come from an
    organizer's or judge's review, where flags are shown to the reviewer instead)."""
    error_factor: float = Field(default=1.0, ge=1)
    """A resubmission is flagged when an error figure exceeds the previous best's times this.
    1.0 is strict; ranked runs draw their own inputs, so errors vary a little run to run."""


class Contest(Strict):
    """A contest's configuration."""

    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]*$")
    """Short name in addresses, e.g. ccf-2026-kernels."""
    title: str = Field(min_length=1)
    start: dt.datetime
    """Entries submitted at or after this count (UTC; naive is read as UTC)."""
    end: dt.datetime
    """Entries submitted at or after this do not count."""
    problems: list[str] = Field(min_length=1, max_length=MAX_PROBLEMS)
    """Problem ids in the contest; entries for other problems never count."""
    device_kinds: list[str] = Field(min_length=1, max_length=MAX_DEVICE_KINDS)
    """Device kinds judged; entries judged on others never count."""
    rule: Rule
    """The scoring rule, by name, with its parameters."""
    freeze_hours: float = Field(default=0.0, ge=0)
    """The public standings stop changing this long before the end (eligibility.before_freeze)."""
    daily_submission_limit: int | None = Field(default=None, gt=0)
    """Submissions a contestant may make a day; enforced by the service when submitting."""
    resubmission: ResubmissionPolicy = Field(default_factory=lambda: ResubmissionPolicy())

    @field_validator("start", "end")
    @classmethod
    def _utc(cls, value: dt.datetime) -> dt.datetime:
        return as_utc(value)

    @field_validator("problems")
    @classmethod
    def _unique_problems(cls, value: list[str]) -> list[str]:
        return _unique(value, "problems")

    @field_validator("device_kinds")
    @classmethod
    def _unique_devices(cls, value: list[str]) -> list[str]:
        return _unique(value, "device_kinds")

    @model_validator(mode="after")
    def _window(self) -> Contest:
        if self.end <= self.start:
            raise ValueError(
                f"the contest must end after it starts: end {self.end.isoformat()} is not after "
                f"start {self.start.isoformat()}"
            )
        hours = (self.end - self.start).total_seconds() / 3600
        if self.freeze_hours > hours:
            raise ValueError(f"freeze_hours ({self.freeze_hours:g}) is longer than the contest ({hours:g} hours)")
        return self

    @property
    def freeze_at(self) -> dt.datetime:
        """Entries submitted from this time on are hidden from the frozen public standings."""
        return self.end - dt.timedelta(hours=self.freeze_hours)


class Row(Strict):
    """One contestant's place."""

    rank: int = Field(ge=1)
    """Place; contestants the rule and every tie rule find equal share it (1, 1, 3)."""
    contestant: str
    total: float
    """The figure the rule ranks on first (points, share, samples, judge score)."""
    breakdown: dict[str, float] = Field(default_factory=dict)
    """Per problem (the speed-ranked rules: per problem@device kind), what it added or scored."""
    figures: dict[str, int | float | str] = Field(default_factory=dict)
    """The figures the tie rules read, by name, so a contestant can check the order."""
    tie_break: str | None = None
    """The tie rule that put this row below the row above with an equal total; None where the
    totals differ, on the first row, and where the rows share a rank."""

    @classmethod
    def trusted(cls, fields: dict) -> Row:
        """A row from a rule's own figures, every field given, without validation (Entry.trusted):
        model_construct's default handling costs more than the rule's work per row."""
        return _trusted(cls, fields, _ROW_FIELDS)


_ROW_FIELDS = frozenset(Row.model_fields)


class Standings(Strict):
    """A contest's standings, best first."""

    contest: str
    """The contest's slug."""
    rule: str
    tie_rules: list[str] = Field(default_factory=list)
    """The rule's tie rules, in the order they apply."""
    rows: list[Row] = Field(default_factory=list)
