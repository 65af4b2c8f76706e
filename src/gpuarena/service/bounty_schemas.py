"""What the bounty API accepts and returns (the pydantic models double as the OpenAPI schema)."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field

from gpuarena.service.schemas import Model

Category = Literal["speed", "feature", "bug", "hardware"]
State = Literal["open", "claimed", "submitted", "verified", "paid", "expired", "withdrawn"]
TargetOver = Literal["reference", "leaderboard"]
EXPORT_FIELDS = [
    "id",
    "title",
    "category",
    "state",
    "reward_amount",
    "currency",
    "problem",
    "device_kind",
    "target_over",
    "target_speedup",
    "baseline_score",
    "required_score",
    "claimer",
    "claim_expires_at",
    "submission_id",
    "deadline",
    "created_by",
    "created_at",
]
"""The board's CSV columns (its JSON has every field, the description and each history too)."""


def board_csv(rows: Iterable[dict[str, Any]]) -> str:
    """Bounties (as JSON dicts) as CSV text: the API's export and the CLI's `list --csv` agree."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=EXPORT_FIELDS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


class BountyRequest(Model):
    """A new bounty (organisers and admins). A speed bounty names a problem, a device kind and
    a target; tiered targets (2x, 4x, 8x on one problem) are one bounty each."""

    title: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=20_000)
    """Markdown, shown on the bounty's page."""
    reward_amount: str = Field(min_length=1, max_length=32)
    """A positive decimal number as text, e.g. "500" or "12.50": money is never a JSON number (a float)."""
    currency: str = Field(default="USD", min_length=1, max_length=16)
    """A currency code such as USD, EUR or USDC."""
    category: Category
    """speed (verified by a ranked run), or feature, bug or hardware (verified by an organiser)."""
    problem: str | None = None
    """Speed bounties: the problem id, e.g. level1/softmax."""
    device_kind: str | None = None
    """Speed bounties: the device kind the ranked run must be on, e.g. H100 (a runner must have brought it)."""
    target_over: TargetOver | None = None
    """Speed bounties: reference (the problem's reference implementation; the default) or
    leaderboard (the best ranked score on the problem and device kind now)."""
    target_speedup: float | None = None
    """Speed bounties: the speed-up over target_over a ranked run must reach, e.g. 2 for 2x."""
    claim_days: int = 7
    """How long a claim holds before it lapses back to open, unless renewed (1 to 365)."""
    deadline: dt.datetime | None = None
    """Optional: after this (UTC) the bounty expires unless verified."""


class NoteRequest(Model):
    """The body of a state change: an optional note kept in the bounty's history (where the
    work is, why it was released or withdrawn, the payment's reference)."""

    note: str = Field(default="", max_length=2000)


class BountyEventOut(Model):
    """One change of a bounty, with who made it and when."""

    at: dt.datetime
    actor: str | None
    """The account that made the change; None: the service itself (a lapsed claim, a ranked run)."""
    action: str
    from_state: str
    to_state: str
    note: str


class BountyOut(Model):
    """A bounty as the board lists it."""

    id: int
    title: str
    description: str
    reward_amount: str
    """A decimal number as text."""
    currency: str
    category: Category
    state: State
    problem: str | None
    device_kind: str | None
    target_over: TargetOver | None
    target_speedup: float | None
    baseline_score: float | None
    """The score the target multiplies: 1.0 over the reference, the leaderboard's best when the bounty was made."""
    required_score: float | None
    """The ranked score a run must reach: target_speedup x baseline_score."""
    target: str
    """The target in words ("" for bounties an organiser verifies)."""
    claim_days: int
    claimer: str | None
    claim_expires_at: dt.datetime | None
    """When the claim lapses back to open unless renewed."""
    submission_id: int | None
    """The ranked run that verified a speed bounty."""
    deadline: dt.datetime | None
    created_by: str
    created_at: dt.datetime


class BountyDetail(BountyOut):
    """A bounty with its whole history, oldest first."""

    history: list[BountyEventOut]
    warnings: list[str] = Field(default_factory=list)
    """On creation: what will not work yet, such as a device kind no runner has brought."""
