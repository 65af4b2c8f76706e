"""Time on the bounty board: lapsed claims and passed deadlines, applied lazily.

`sweep` runs at the start of every change (bounties.py) and, through `refresh`, before reads;
it first judges the ranked runs whose contest hold is over (bounty_runs.py), since a claim
waits for such a run's verdict instead of lapsing under it.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from gpuarena.service.bounty_changes import HELD, LIVE, change, let_go, user_name, when
from gpuarena.service.bounty_runs import judge, released
from gpuarena.service.db import Database
from gpuarena.service.leaderboard import RANKED_MODE
from gpuarena.service.tables import Bounty, Problem, Submission, utcnow

IN_FLIGHT = ("QUEUED", "RUNNING")


def _run_in_flight(session: Session, bounty: Bounty, queued_by: dt.datetime, now: dt.datetime) -> bool:
    """Whether the claimer has a ranked run for this speed bounty queued by `queued_by` that
    has not finished, or whose result a contest's freeze still holds: the claim (or deadline)
    waits for its verdict instead of lapsing under it."""
    if bounty.category != "speed" or bounty.claimer_id is None:
        return False
    return (
        session.scalar(
            select(Submission.id)
            .join(Problem, Problem.id == Submission.problem_id)
            .where(
                Submission.user_id == bounty.claimer_id,
                Problem.slug == bounty.problem_slug,
                Submission.device_kind == bounty.device_kind,
                Submission.mode == RANKED_MODE,
                or_(Submission.status.in_(IN_FLIGHT), Submission.held_until > now),
                Submission.created_at <= queued_by,
                Submission.created_at >= bounty.created_at,  # runs from before the bounty do not count
            )
            .limit(1)
        )
        is not None
    )


def _expiring(now: dt.datetime) -> ColumnElement[bool]:
    """Bounties whose deadline passed; work submitted to an organiser in time waits for them."""
    return and_(
        Bounty.state.in_(LIVE), Bounty.deadline <= now, ~and_(Bounty.state == "submitted", Bounty.category != "speed")
    )


def _lapsing(now: dt.datetime) -> ColumnElement[bool]:
    """Claims whose lock ran out: any claimed bounty, and a submitted speed bounty (its run fell
    short; a feature submitted to an organiser keeps its claim while they look at it)."""
    return and_(
        Bounty.claim_expires_at <= now,
        or_(Bounty.state == "claimed", and_(Bounty.state == "submitted", Bounty.category == "speed")),
    )


def due(session: Session, now: dt.datetime | None = None) -> bool:
    """Whether `sweep` has anything to do (a cheap read, so reads sweep only when needed)."""
    now = now or utcnow()
    if session.scalar(select(Bounty.id).where(or_(_expiring(now), _lapsing(now))).limit(1)) is not None:
        return True
    return session.execute(released(now).limit(1)).first() is not None


def sweep(session: Session, now: dt.datetime | None = None) -> list[int]:
    """Judge the held runs whose hold is over (before anything lapses: the claim waited for
    them), then expire bounties past their deadline and put lapsed claims back to open (the
    service is the actor), except while a ranked run the claimer queued in time is still
    running or held."""
    now = now or utcnow()
    changed = []
    for bounty, submission in session.execute(released(now).with_for_update(of=Bounty, skip_locked=True)).all():
        if bounty.state in HELD and bounty.claimer_id == submission.user_id:  # an earlier run may have verified it
            judge(session, bounty, submission, now)
            changed.append(bounty.id)
    for bounty in session.scalars(select(Bounty).where(_expiring(now)).with_for_update(skip_locked=True)):
        assert bounty.deadline is not None
        if _run_in_flight(session, bounty, bounty.deadline, now):
            continue
        let_go(bounty)
        change(session, bounty, None, "expired", "expired", f"the deadline {when(bounty.deadline)} passed", now)
        changed.append(bounty.id)
    for bounty in session.scalars(select(Bounty).where(_lapsing(now)).with_for_update(skip_locked=True)):
        assert bounty.claim_expires_at is not None
        if _run_in_flight(session, bounty, bounty.claim_expires_at, now):
            continue
        note = f"{user_name(session, bounty.claimer_id)}'s claim ran out at {when(bounty.claim_expires_at)}"
        let_go(bounty)
        change(session, bounty, None, "claim lapsed", "open", note, now)
        changed.append(bounty.id)
    return changed


def refresh(db: Database, now: dt.datetime | None = None) -> None:
    """Sweep before a read, in a write transaction of its own, only when something is due."""
    with db.read() as session:
        if not due(session, now):
            return
    with db.write() as session:
        sweep(session, now)
