"""The bounty board's tables (issue 20): a bounty and the history of its changes.

Split from tables.py, which re-exports them: `from gpuarena.service.tables import Bounty`
still works, and they are on the one Base (table_base.py), so Alembic's metadata is unchanged.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    DateTime,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from gpuarena.service.table_base import Base, utcnow

# Bounties (issue 20)


class Bounty(Base):
    """A reward for a piece of work: speed bounties are verified by a ranked run, the others by
    an organizer. States: open, claimed, submitted, verified, paid, expired, withdrawn."""

    __tablename__ = "bounties"

    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    reward_amount: Mapped[str] = mapped_column(String(32))
    """A decimal number as text: money is never a float."""
    currency: Mapped[str] = mapped_column(String(16))
    category: Mapped[str] = mapped_column(String(16))
    """speed, feature, bug or hardware."""
    problem_slug: Mapped[str | None] = mapped_column(String(200), nullable=True)
    device_kind: Mapped[str | None] = mapped_column(String(64), nullable=True)
    target_over: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """reference or leaderboard: what the speed-up target is measured against."""
    target_speedup: Mapped[float | None] = mapped_column(Float, nullable=True)
    baseline_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The leaderboard best when the bounty was made (target_over leaderboard); 1.0 over the reference."""
    required_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The ranked score a run must reach: target_speedup x baseline_score."""
    claim_days: Mapped[int] = mapped_column(Integer, default=7)
    state: Mapped[str] = mapped_column(String(16), default="open")
    claimer_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    claim_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    submission_id: Mapped[int | None] = mapped_column(ForeignKey("submissions.id"), nullable=True)
    """The run that verified it (speed bounties)."""
    deadline: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    """After this the bounty expires unless verified."""
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class BountyEvent(Base):
    """Every change of a bounty, with who made it (None: the service itself) and when."""

    __tablename__ = "bounty_events"

    id: Mapped[int] = mapped_column(primary_key=True)
    bounty_id: Mapped[int] = mapped_column(ForeignKey("bounties.id"), index=True)
    at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    actor_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    action: Mapped[str] = mapped_column(String(32))
    from_state: Mapped[str] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    note: Mapped[str] = mapped_column(Text, default="")
