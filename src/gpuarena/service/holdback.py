"""Results held by a contest's freeze (issue 46, item 4).

A contest's public standings stop at its freeze; so must everything else that shows a result.
An entry made during the freeze gets `Submission.held_until` (the contest's end) when it is
made (contests.enter). Until then its result (status, score, reason, record) is shown to its
author, the contest's organisers and admins only: everyone else sees it listed as HELD, and
the leaderboards, their history, the home page's leaders and the user pages count it nowhere
(its best waits in HeldBest, its history point carries the hold). At the end it shows: the
holds are read against the clock, and the held bests are folded into the public leaderboard
by leaderboard.release_due.

Who sees what is one `Scope` per request, read once: the viewer, whether an admin, and the
contests they organise (rights.py's rule, per contest, never a global role)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, false, or_, select, true
from sqlalchemy.orm import Session

from gpuarena.service.deps import Caller
from gpuarena.service.tables import BestPointRow, ContestEntry, ContestOrganizer, HeldBest, Submission

HELD = "HELD"
"""The status a held result is listed with to those who may not see it."""


@dataclass(frozen=True)
class Scope:
    """Whose held results a viewer sees: their own, those of the contests they organise, and
    every one for an admin. Anonymous: none."""

    user_id: int | None = None
    admin: bool = False
    organised: frozenset[int] = field(default_factory=frozenset)

    def sees(self, user_id: int, contest_id: int | None) -> bool:
        return self.admin or user_id == self.user_id or (contest_id is not None and contest_id in self.organised)


ANONYMOUS = Scope()


def scope(session: Session, viewer: Caller | None) -> Scope:
    if viewer is None:
        return ANONYMOUS
    if viewer.role == "admin":
        return Scope(user_id=viewer.user_id, admin=True)
    organised = session.scalars(select(ContestOrganizer.contest_id).where(ContestOrganizer.user_id == viewer.user_id))
    return Scope(user_id=viewer.user_id, organised=frozenset(organised))


def is_held(held_until: dt.datetime | None, now: dt.datetime) -> bool:
    return held_until is not None and held_until > now


def hidden(session: Session, who: Scope, rows: Iterable[Submission], now: dt.datetime) -> set[int]:
    """The ids among these submissions whose results `who` may not see yet."""
    if who.admin:
        return set()
    candidates = [s.id for s in rows if is_held(s.held_until, now) and s.user_id != who.user_id]
    if not candidates or not who.organised:
        return set(candidates)
    contest_of = dict(
        session.execute(
            select(ContestEntry.submission_id, ContestEntry.contest_id).where(
                ContestEntry.submission_id.in_(candidates)
            )
        ).all()
    )
    return {sid for sid in candidates if contest_of.get(sid) not in who.organised}


def result_visible(who: Scope, now: dt.datetime) -> ColumnElement[bool]:
    """SQL: the submission's result is one `who` may see (a filter by status or score must not
    find a held result: its place in a filtered list would tell it)."""
    if who.admin:
        return true()
    conditions: list[ColumnElement[bool]] = [Submission.held_until.is_(None), Submission.held_until <= now]
    if who.user_id is not None:
        conditions.append(Submission.user_id == who.user_id)
    if who.organised:
        conditions.append(
            Submission.id.in_(
                select(ContestEntry.submission_id).where(ContestEntry.contest_id.in_(sorted(who.organised)))
            )
        )
    return or_(*conditions)


def held_rows_visible(who: Scope, now: dt.datetime, table: type[HeldBest] | type[BestPointRow]) -> ColumnElement[bool]:
    """SQL: a held best (or history point) `who` may see: released (its contest ended), or theirs
    to see. A history point with no hold is everyone's."""
    conditions: list[ColumnElement[bool]] = [table.held_until <= now]
    if table is BestPointRow:
        conditions.append(BestPointRow.held_until.is_(None))
    if who.admin:
        return true()
    if who.user_id is not None:
        conditions.append(table.user_id == who.user_id)
    if who.organised:
        conditions.append(table.contest_id.in_(sorted(who.organised)))
    return or_(*conditions) if conditions else false()
