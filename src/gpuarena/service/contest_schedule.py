"""Moving a contest's end: an organizer extends a contest (an outage, a late problem fix) or
ends it now, and may bring its freeze forward.

A result held by the freeze is held until the contest's end (holdback.py), and that end is
copied where the hold is read: the entry's submission, its held best beside the leaderboard and
its point on the problem's history. Moving the end moves all three in the same transaction, so
a held result shows exactly when the contest now ends, and one shown is never hidden again:
the end cannot move into the past, nor a freeze begin there."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpuarena.errors import GpuarenaError
from gpuarena.service.contest_schemas import ContestSpec, Schedule
from gpuarena.service.contests import naive, phase, require_organizer, spec_of
from gpuarena.service.deps import Caller
from gpuarena.service.tables import BestPointRow, ContestEntry, ContestRow, HeldBest, Submission, utcnow


def rescheduled(spec: ContestSpec, schedule: Schedule, now: dt.datetime) -> ContestSpec:
    """The contest file with its new end and freeze, or the reason it cannot move."""
    when = phase(spec, now)
    end, freeze_asked = schedule.at(now)
    if when == "ended":
        raise GpuarenaError(f"{spec.slug} ended {spec.end:%Y-%m-%d %H:%M:%S} UTC; its results are final")
    if end < now:
        raise GpuarenaError(
            f"the new end {end:%Y-%m-%d %H:%M:%S} UTC is in the past: a contest can end now, "
            "not earlier (entries made since were made inside it)"
        )
    if end <= spec.start:
        raise GpuarenaError(f"the new end is not after the start ({spec.start:%Y-%m-%d %H:%M:%S} UTC)")
    if when == "frozen":
        if freeze_asked is not None and freeze_asked != spec.freeze_at:
            raise GpuarenaError(
                f"the freeze began {spec.freeze_at:%Y-%m-%d %H:%M:%S} UTC and stays there: moving it would "
                "show or hide entries the frozen standings already settled"
            )
        freeze_from = spec.freeze_at
    else:
        asked = freeze_asked if freeze_asked is not None else end - (spec.end - spec.freeze_at)
        freeze_from = min(max(asked, now, spec.start), end)
    hours = (end - freeze_from).total_seconds() / 3600 if spec.freeze_hours or freeze_asked else 0.0
    return ContestSpec.model_validate(spec.model_dump() | {"end": end, "freeze_hours": hours})


def reschedule(session: Session, row: ContestRow, who: Caller, schedule: Schedule) -> ContestSpec:
    """Move the contest's end (and freeze), and every hold its freeze gave, to the new end."""
    require_organizer(session, row, who)
    old = spec_of(row)
    new = rescheduled(old, schedule, utcnow().replace(tzinfo=dt.UTC))
    row.config = new.model_dump(mode="json")
    row.end = naive(new.end)
    old_end, new_end = naive(old.end), naive(new.end)
    entries = select(ContestEntry.submission_id).where(ContestEntry.contest_id == row.id)
    session.execute(
        update(Submission)
        .where(Submission.id.in_(entries), Submission.held_until == old_end)
        .values(held_until=new_end)
        .execution_options(synchronize_session=False)
    )
    session.execute(update(HeldBest).where(HeldBest.contest_id == row.id).values(held_until=new_end))
    session.execute(
        update(BestPointRow)
        .where(BestPointRow.contest_id == row.id, BestPointRow.held_until.is_not(None))
        .values(held_until=new_end)
    )
    session.flush()
    return new
