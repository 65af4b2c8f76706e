"""The bounty board as it is read: the board, a bounty's details and history, in the API's
shapes (bounty_schemas.py). The rules that change bounties are in bounties.py."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuarena.errors import GpuarenaError
from gpuarena.service.bounties import CATEGORIES, STATES, target_text
from gpuarena.service.bounty_schemas import BountyDetail, BountyEventOut, BountyOut
from gpuarena.service.errors import NotFound
from gpuarena.service.tables import Bounty, BountyEvent, User


def _names(session: Session, ids: Iterable[int | None]) -> dict[int, str]:
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    rows = session.execute(select(User.id, User.name).where(User.id.in_(wanted)))
    return {user_id: name for user_id, name in rows}


def _out(bounty: Bounty, names: dict[int, str]) -> dict:
    return dict(
        id=bounty.id,
        title=bounty.title,
        description=bounty.description,
        reward_amount=bounty.reward_amount,
        currency=bounty.currency,
        category=bounty.category,
        state=bounty.state,
        problem=bounty.problem_slug,
        device_kind=bounty.device_kind,
        target_over=bounty.target_over,
        target_speedup=bounty.target_speedup,
        baseline_score=bounty.baseline_score,
        required_score=bounty.required_score,
        target=target_text(bounty),
        claim_days=bounty.claim_days,
        claimer=names.get(bounty.claimer_id) if bounty.claimer_id else None,
        claim_expires_at=bounty.claim_expires_at,
        submission_id=bounty.submission_id,
        deadline=bounty.deadline,
        created_by=names.get(bounty.created_by, "?"),
        created_at=bounty.created_at,
    )


def board(session: Session, state: str | None = None, category: str | None = None) -> list[BountyOut]:
    """The bounties, newest first, filtered by state and category."""
    if state is not None and state not in STATES:
        raise GpuarenaError(f"state {state!r}: use one of {', '.join(STATES)}")
    if category is not None and category not in CATEGORIES:
        raise GpuarenaError(f"category {category!r}: use one of {', '.join(CATEGORIES)}")
    query = select(Bounty).order_by(Bounty.id.desc())
    if state:
        query = query.where(Bounty.state == state)
    if category:
        query = query.where(Bounty.category == category)
    found = list(session.scalars(query))
    names = _names(session, [i for b in found for i in (b.claimer_id, b.created_by)])
    return [BountyOut(**_out(b, names)) for b in found]


def history(session: Session, bounty_ids: list[int]) -> dict[int, list[BountyEventOut]]:
    """The events of these bounties, oldest first."""
    events = list(
        session.scalars(select(BountyEvent).where(BountyEvent.bounty_id.in_(bounty_ids)).order_by(BountyEvent.id))
    )
    names = _names(session, [e.actor_id for e in events])
    found: dict[int, list[BountyEventOut]] = {i: [] for i in bounty_ids}
    for e in events:
        found[e.bounty_id].append(
            BountyEventOut(
                at=e.at,
                actor=names.get(e.actor_id) if e.actor_id else None,
                action=e.action,
                from_state=e.from_state,
                to_state=e.to_state,
                note=e.note,
            )
        )
    return found


def detail(session: Session, bounty_id: int) -> BountyDetail:
    bounty = session.get(Bounty, bounty_id)
    if bounty is None:
        raise NotFound(f"no bounty {bounty_id} (GET /api/bounties lists them)")
    names = _names(session, [bounty.claimer_id, bounty.created_by])
    return BountyDetail(**_out(bounty, names), history=history(session, [bounty_id])[bounty_id])
