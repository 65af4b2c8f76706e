"""The dataset samples' table (issue 21): a sample submitted to the service and its review.

Split from tables.py, which re-exports it: `from gpuarena.service.tables import SampleRow`
still works, and it is on the one Base (table_base.py), so Alembic's metadata is unchanged.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
)
from sqlalchemy.orm import Mapped, mapped_column

from gpuarena.service.table_base import Base, utcnow

# Dataset samples (issue 21)


class SampleRow(Base):
    """A dataset sample submitted to the service. Its check is the submission it was made as
    (to the samples problem, the sample's folder as the solution: dataset/sample_pack.py);
    here are what the check found and the organizers' review. Accepted samples are the
    dataset the service adds to (`gpuarena dataset pull`)."""

    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_review", "review", "submission_id"),)

    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    contributor: Mapped[str] = mapped_column(String(64))
    llm: Mapped[str] = mapped_column(Text)
    problem: Mapped[str] = mapped_column(String(200))
    """The problem's name, from its problem.toml."""
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """ok, duplicate or broken once a runner checked it (None before)."""
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    """The dataset.sample.SampleReport, as JSON."""
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The optimised kernel's speed-up over the reference (what a ccf-dataset contest adds up)."""
    review: Mapped[str] = mapped_column(String(16), default="pending")
    """pending, accepted or rejected (by an organizer)."""
    review_comment: Mapped[str] = mapped_column(Text, default="")
    reviewer_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    reviewed_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    checked_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
