"""A contest's entries read from the tables as the scoring rules read them: plain rows, built
into `contests.model.Entry` records without validation (every field was checked on its way
in), fast enough for standings over hundreds of thousands of entries
(bench/contest_standings_service.py)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from typing import Any, TypeVarTuple

from sqlalchemy import Row, Select, Text, select, type_coerce
from sqlalchemy.orm import Session

from gpuarena.contests.model import Entry
from gpuarena.contests.table import COLUMNS
from gpuarena.service.tables import ContestEntry, ContestRow, Problem, Submission, User

_Row = TypeVarTuple("_Row")

REVIEWED = {"accepted": True, "rejected": False}
"""A review as Entry.accepted_by_organizer reads it (pending: None)."""

_RULE_COLUMNS = (
    ContestEntry.submission_id,
    ContestEntry.contestant,
    Problem.slug,
    Problem.level,
    Submission.device_kind,
    Submission.status,
    Submission.mode,
    Submission.score,
    ContestEntry.score_low,
    ContestEntry.score_high,
    ContestEntry.max_abs_error,
    ContestEntry.max_rel_error,
    type_coerce(ContestEntry.submitted_at, Text),
    ContestEntry.review,
    ContestEntry.merged_upstream,
    type_coerce(ContestEntry.bonus, Text),
    ContestEntry.samples_accepted,
    ContestEntry.samples_score,
    ContestEntry.judge_score,
    ContestEntry.completeness,
)
"""What the rules read, in _as_entry's order. Bonus as its JSON text (decoded only where not
empty; PostgreSQL's driver decodes it anyway) and the time as SQLite's text (parsed by datetime.fromisoformat, ten times faster than
the column type's own parser; PostgreSQL's driver gives a datetime either way)."""


def _joined(query: Select[*_Row]) -> Select[*_Row]:
    return query.join(Submission, Submission.id == ContestEntry.submission_id).join(
        Problem, Problem.id == Submission.problem_id
    )


_RULE_ROWS = _joined(select(*_RULE_COLUMNS))
RULE_ROWS_STAMPED = _joined(select(*_RULE_COLUMNS, type_coerce(ContestEntry.updated_at, Text)))
_ENTRY_ROWS = _joined(
    select(
        *ContestEntry.__table__.columns,
        Submission.status,
        Submission.mode,
        Submission.score,
        Submission.device_kind,
        Problem.slug.label("problem"),
        Problem.level,
        User.name.label("user"),
    )
).join(User, User.id == ContestEntry.user_id)


def entry_rows(
    session: Session,
    row: ContestRow,
    query: Select[*tuple[Any, ...]] = _ENTRY_ROWS,
    contestants: set[str] | None = None,
) -> list[Row]:
    """Plain rows, not ORM objects: loading a large contest's entries as objects costs a
    hundred times more than the rule that reads them (bench/contest_standings_service.py).
    With contestants, only theirs."""
    query = query.where(ContestEntry.contest_id == row.id)
    if contestants is not None:
        query = query.where(ContestEntry.contestant.in_(sorted(contestants)))
    return list(session.connection().execute(query.order_by(ContestEntry.submission_id)).all())


def as_time(value: str | dt.datetime) -> dt.datetime:
    """A naive UTC time as SQLite's text or PostgreSQL's datetime."""
    return value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)


def _as_list(value: str | list | None) -> list:
    """Bonus items as SQLite's JSON text (decoded only where not empty) or PostgreSQL's list
    (its driver decodes JSON itself)."""
    if isinstance(value, list):
        return value
    return json.loads(value) if value and value != "[]" else []


def as_entry(r: tuple) -> Entry:
    """A row of _RULE_COLUMNS as the rules read it, built without validation (Entry.trusted):
    every field was checked on its way into the tables (the review request, the runner's
    record). Names are interned, as Entry's validator would."""
    (
        sid,
        contestant,
        problem,
        level,
        kind,
        status,
        mode,
        score,
        low,
        high,
        abs_error,
        rel_error,
        at,
        review,
        merged,
        bonus,
        samples,
        samples_score,
        judge,
        completeness,
    ) = r
    passed = status == "PASSED"
    return Entry.trusted(
        dict(
            submission_id=sid,
            contestant=sys.intern(contestant),
            problem=sys.intern(problem),
            level=level,
            device_kind=sys.intern(kind),
            status=sys.intern(status),
            mode=mode,
            score=score if passed else None,
            score_low=low if passed else None,
            score_high=high if passed else None,
            max_abs_error=abs_error,
            max_rel_error=rel_error,
            submitted_at=as_time(at).replace(tzinfo=dt.UTC),
            accepted_by_organizer=REVIEWED.get(review),
            merged_upstream=bool(merged),
            bonus=_as_list(bonus),
            samples_accepted=samples,
            samples_score=samples_score,
            judge_score=judge,
            completeness=completeness,
        )
    )


def rule_entries(session: Session, row: ContestRow, contestants: set[str] | None = None) -> list[Entry]:
    """The contest's entries (or those of some contestants), as the scoring rules read them."""
    return [as_entry(r) for r in entry_rows(session, row, _RULE_ROWS, contestants)]


def rule_columns(columns: list[tuple]) -> dict[str, tuple | list]:
    """Columns of _RULE_COLUMNS (rows transposed) as contests.table reads them: the review as
    accepted_by_organizer; times, bonus and names as they come (the table parses them). The
    scores of a run that did not pass are dropped by the table (failed_scores=False), as
    as_entry drops them."""
    named: dict[str, tuple | list] = dict(zip(COLUMNS, columns))
    named["accepted_by_organizer"] = [REVIEWED.get(r) for r in named["accepted_by_organizer"]]
    return named
