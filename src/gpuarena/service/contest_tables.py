"""The contests' tables (issue 20): a contest, its organisers, its teams and its entries.

Split from tables.py, which re-exports them: `from gpuarena.service.tables import ContestRow`
still works, and they are on the one Base (table_base.py), so Alembic's metadata is unchanged.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from gpuarena.service.table_base import Base, utcnow

# Contests (issue 20): the configuration is the pydantic `contests.model.Contest`, stored whole;
# the columns beside it are what queries filter on.


class ContestRow(Base):
    """A contest: a window of time over some problems and device kinds, with one scoring rule."""

    __tablename__ = "contests"

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text, default="")
    """Markdown, shown on the contest's page."""
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    """The contests.model.Contest record, as JSON (rule and its parameters, problems, device kinds...)."""
    start: Mapped[dt.datetime] = mapped_column(DateTime)
    end: Mapped[dt.datetime] = mapped_column(DateTime)
    teams: Mapped[bool] = mapped_column(Boolean, default=False)
    """Entries are by team (a named set of users) instead of by user."""
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    entries_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Its entries, counted as they are made (contests.enter): the contest's pages show the
    number without counting them."""


class ContestOrganizer(Base):
    """A user who may review a contest's submissions and see its live standings."""

    __tablename__ = "contest_organizers"

    contest_id: Mapped[int] = mapped_column(ForeignKey("contests.id"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)


class TeamMember(Base):
    """A user's team in one contest (one team per user and contest)."""

    __tablename__ = "contest_team_members"

    contest_id: Mapped[int] = mapped_column(ForeignKey("contests.id"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    team: Mapped[str] = mapped_column(String(64))


class ContestEntry(Base):
    """A submission made into a contest, with the figures the scoring rules read and the
    organizer's review. Figures are copied from the result when it arrives (a standings
    recomputation reads this table alone, not every Evaluation record)."""

    __tablename__ = "contest_entries"
    __table_args__ = (
        Index("ix_contest_entries_contest", "contest_id", "submission_id"),
        Index("ix_contest_entries_contestant_day", "contest_id", "contestant", "submitted_at"),
        Index("ix_contest_entries_updated", "contest_id", "updated_at"),
    )

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    contest_id: Mapped[int] = mapped_column(ForeignKey("contests.id"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    contestant: Mapped[str] = mapped_column(String(64))
    """The user's name, or their team's in a team contest (fixed when submitted)."""
    submitted_at: Mapped[dt.datetime] = mapped_column(DateTime)
    score_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    score_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_abs_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_rel_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    review: Mapped[str] = mapped_column(String(16), default="pending")
    """pending, accepted or rejected (by an organizer)."""
    review_comment: Mapped[str] = mapped_column(Text, default="")
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    reviewed_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    merged_upstream: Mapped[bool] = mapped_column(Boolean, default=False)
    bonus: Mapped[list[Any]] = mapped_column(JSON, default=list)
    samples_accepted: Mapped[int] = mapped_column(Integer, default=0)
    samples_score: Mapped[float] = mapped_column(Float, default=0.0)
    judge_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    completeness: Mapped[float | None] = mapped_column(Float, nullable=True)
    updated_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    """Set whenever what the rules read changes (made, result in, reviewed): standings kept in
    memory reread only the entries changed since (service/contests.py)."""
