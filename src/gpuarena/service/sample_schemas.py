"""What the samples API reads and writes: samples with their check and review, the
organizers' review request. Accepted samples travel as dataset/pull.py's DatasetSample."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuarena.dataset.sample import SampleReport

SampleStatus = Literal["queued", "checking", "ok", "duplicate", "broken", "error", "cancelled", "held"]


class SampleOut(BaseModel):
    """A sample as anyone may list it: who, what, where its check and its review stand."""

    id: int
    """The sample's submission (its check): /submissions/ID."""
    user: str
    contributor: str
    llm: str
    problem: str
    device_kind: str
    contest: str | None
    status: SampleStatus
    """queued and checking until a runner checked it; then the check's verdict (ok, duplicate,
    broken); error or cancelled when the check never ended (the submission says why); held
    (no score, report or files, the review as pending) while a contest's freeze holds it from
    the viewer (service/holdback.py)."""
    score: float | None
    """The optimised kernel's speed-up over the reference, from the check."""
    review: Literal["pending", "accepted", "rejected"]
    review_comment: str
    reviewer: str | None
    created_at: dt.datetime
    checked_at: dt.datetime | None
    reviewed_at: dt.datetime | None
    held_until: dt.datetime | None = None
    """An entry made during its contest's freeze: its result is held until then (the contest's end)."""


class SampleDetail(SampleOut):
    """One sample: its check's report, and its files for whom a submission's code is shown."""

    report: SampleReport | None
    files: dict[str, str] | None
    """sample.toml, the problem, the prompt, both kernels and the report; None where hidden."""
    files_hidden: bool


class SampleReviewRequest(BaseModel):
    """An organizer's decision on a checked sample (only a sample whose check was ok can be accepted)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    decision: Literal["accepted", "rejected", "pending"]
    comment: str = Field(default="", max_length=5000)
    """Shown to the contributor with the decision."""
