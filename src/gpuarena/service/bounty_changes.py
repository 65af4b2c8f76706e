"""The bounty board's states and the primitives every rule that changes a bounty uses.

Posting and moving bounties (bounties.py), ranked runs judging speed bounties
(bounty_runs.py) and the sweep of lapsed claims and passed deadlines (bounty_sweep.py) all
write a change the same way: `change` keeps its BountyEvent. They live here, below all three,
so that the rules can call `sweep` without an import circle.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuarena.service.errors import NotFound
from gpuarena.service.tables import Bounty, BountyEvent, User

CATEGORIES = ("speed", "feature", "bug", "hardware")
STATES = ("open", "claimed", "submitted", "verified", "paid", "expired", "withdrawn")
TARGETS = ("reference", "leaderboard")
LIVE = ("open", "claimed", "submitted")
"""States a deadline can still expire and an organiser can withdraw from."""
HELD = ("claimed", "submitted")
"""States with a claimer."""
MAX_CLAIM_DAYS = 365
MAX_SPEEDUP = 1e6


def when(value: dt.datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC" if value else "-"


def change(
    session: Session, bounty: Bounty, actor_id: int | None, action: str, to_state: str, note: str, now: dt.datetime
) -> None:
    """Move bounty to to_state (or leave it, for a note such as a run's attempt) and keep the event."""
    session.add(
        BountyEvent(
            bounty_id=bounty.id,
            at=now,
            actor_id=actor_id,
            action=action,
            from_state=bounty.state,
            to_state=to_state,
            note=note,
        )
    )
    bounty.state = to_state


def let_go(bounty: Bounty) -> None:
    bounty.claimer_id, bounty.claim_expires_at = None, None


def locked(session: Session, bounty_id: int) -> Bounty:
    """The bounty, row-locked for this transaction (PostgreSQL; SQLite has one writer anyway)."""
    bounty = session.scalar(select(Bounty).where(Bounty.id == bounty_id).with_for_update())
    if bounty is None:
        raise NotFound(f"no bounty {bounty_id} (GET /api/bounties lists them)")
    return bounty


def user_name(session: Session, user_id: int | None) -> str:
    return (session.scalar(select(User.name).where(User.id == user_id)) or "?") if user_id is not None else "nobody"


def target_text(bounty: Bounty) -> str:
    """A speed bounty's target in words; "" for the others."""
    if bounty.category != "speed" or bounty.required_score is None:
        return ""
    over = (
        "the reference"
        if bounty.target_over == "reference"
        else f"the leaderboard's best ({bounty.baseline_score:.4g} when posted)"
    )
    return (
        f"speed-up of at least {bounty.target_speedup:g}x over {over} on {bounty.problem_slug}, device kind "
        f"{bounty.device_kind}: a ranked score of {bounty.required_score:.4g} or more"
    )
