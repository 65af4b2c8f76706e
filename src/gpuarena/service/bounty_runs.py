"""The harness's side of the bounty board: ranked runs submit and verify speed bounties.

A ranked run queued by a claimer submits their speed bounty (`on_submission`); its result
verifies the bounty or is noted as an attempt (`on_result`, through `judge`). A run whose
result a contest's freeze holds is judged by `sweep` (bounty_sweep.py) once the hold is over:
`released` finds those runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from sqlalchemy import ColumnElement, Select, String, and_, cast, exists, literal, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from gpuarena.service import holdback
from gpuarena.service.bounty_changes import HELD, change, when
from gpuarena.service.leaderboard import RANKED_MODE, counts
from gpuarena.service.tables import Bounty, BountyEvent, Problem, Submission, utcnow


def _claimed_for(submission: Submission, states: Iterable[str]) -> Select[Bounty]:
    """The speed bounties in `states` that the submission's author holds on its problem and device kind."""
    return (
        select(Bounty)
        .join(Problem, Problem.slug == Bounty.problem_slug)
        .where(
            Problem.id == submission.problem_id,
            Bounty.category == "speed",
            Bounty.state.in_(tuple(states)),
            Bounty.claimer_id == submission.user_id,
            Bounty.device_kind == submission.device_kind,
        )
        .with_for_update(of=Bounty)
    )


def on_submission(session: Session, submission: Submission, now: dt.datetime | None = None) -> list[int]:
    """A ranked run queued by a live claimer of speed bounties on its problem and device kind
    moves them claimed -> submitted. Called in the transaction that accepts the submission;
    returns the bounties moved."""
    if submission.mode != RANKED_MODE:
        return []
    now = now or submission.created_at or utcnow()
    moved = []
    for bounty in session.scalars(_claimed_for(submission, ("claimed",))):
        if bounty.claim_expires_at is not None and bounty.claim_expires_at <= now:
            continue  # lapsed (not yet swept): the run came too late
        change(
            session,
            bounty,
            submission.user_id,
            "submitted",
            "submitted",
            f"{_run(submission.id)} on {submission.device_kind}",
            now,
        )
        moved.append(bounty.id)
    return moved


def on_result(session: Session, submission: Submission) -> list[int]:
    """A finished ranked run of a claimer: verifies each of their speed bounties on its problem
    and device kind whose required score it reaches (the service is the actor); a run that falls
    short is noted in the history. Only runs queued after the bounty was posted, while the claim
    (and the deadline) held, count: a run queued before the bounty existed was not made for it.
    A run whose result a contest's freeze holds is only noted as held: `sweep` judges it when
    the hold ends (the history is public). Called in the transaction that accepts the result;
    returns the bounties verified."""
    if submission.mode != RANKED_MODE:
        return []
    now = submission.finished_at or utcnow()
    held = holdback.is_held(submission.held_until, utcnow())
    verified = []
    for bounty in session.scalars(_claimed_for(submission, HELD)):
        made = submission.created_at
        if made < bounty.created_at:
            continue  # queued before the bounty was posted
        if (bounty.claim_expires_at is not None and made > bounty.claim_expires_at) or (
            bounty.deadline is not None and made > bounty.deadline
        ):
            continue
        if held:
            assert submission.held_until is not None
            change(
                session,
                bounty,
                None,
                HELD_RUN,
                bounty.state,
                f"{_run(submission.id)} on {submission.device_kind} is a contest entry made during the "
                f"contest's freeze: its result is held until {when(submission.held_until)}, when it is "
                "judged for this bounty",
                now,
            )
        elif judge(session, bounty, submission, now):
            verified.append(bounty.id)
    return verified


HELD_RUN = "held"
"""The history's action for a run whose result a contest's freeze holds (judged at its end)."""
JUDGED = ("verified", "attempt")
"""The actions of a run's verdict on a speed bounty."""


def _run(submission_id: int) -> str:
    """How the history names a ranked run: every note about a run starts with it (then a space),
    so the run's events are found again by it (`_about`)."""
    return f"ranked run #{submission_id}"


def _about(submission_id: InstrumentedAttribute[int]) -> ColumnElement[bool]:
    """SQL: the event's note is about this run."""
    return BountyEvent.note.like(literal("ranked run #") + cast(submission_id, String) + literal(" %"))


def judge(session: Session, bounty: Bounty, submission: Submission, now: dt.datetime) -> bool:
    """The run's verdict on the bounty: verified when it reaches the target, else an attempt."""
    assert bounty.required_score is not None
    if counts(submission) and submission.score is not None and submission.score >= bounty.required_score:
        bounty.submission_id, bounty.claim_expires_at = submission.id, None  # the lock is done with
        change(
            session,
            bounty,
            None,
            "verified",
            "verified",
            f"{_run(submission.id)} on {submission.device_kind} scored {submission.score:.4g}; "
            f"the target was {bounty.required_score:.4g}",
            now,
        )
        return True
    passed = submission.status == "PASSED" and submission.score is not None
    outcome = (
        f"scored {submission.score:.4g}, short of {bounty.required_score:.4g}"
        if passed
        else f"ended {submission.status}"
    )
    change(session, bounty, None, "attempt", bounty.state, f"{_run(submission.id)} {outcome}", now)
    return False


def released(now: dt.datetime) -> Select[Bounty, Submission]:
    """Held runs whose hold is over and that no verdict has judged yet, with the bounty (still
    claimed or submitted by the run's author) that noted them as held."""
    noted = select(BountyEvent.id).where(
        BountyEvent.bounty_id == Bounty.id, BountyEvent.action == HELD_RUN, _about(Submission.id)
    )
    judged = select(BountyEvent.id).where(
        BountyEvent.bounty_id == Bounty.id, BountyEvent.action.in_(JUDGED), _about(Submission.id)
    )
    return (
        select(Bounty, Submission)
        .join(Problem, Problem.slug == Bounty.problem_slug)
        .join(
            Submission,
            and_(
                Submission.user_id == Bounty.claimer_id,
                Submission.problem_id == Problem.id,
                Submission.device_kind == Bounty.device_kind,
            ),
        )
        .where(
            Bounty.category == "speed",
            Bounty.state.in_(HELD),
            Submission.mode == RANKED_MODE,
            Submission.held_until <= now,
            exists(noted),
            ~exists(judged),
        )
        .order_by(Submission.id)
    )
