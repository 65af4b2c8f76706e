"""The contest API: create and list contests, move their end, standings (JSON and CSV),
entries with their reviews, the organizers' review and similarity flags."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from gpuarena.contests.similarity import SimilarPair
from gpuarena.service import contest_schedule, contest_standings, contests, standings_process
from gpuarena.service.contest_schemas import (
    ContestInfo,
    ContestSpec,
    EntryOut,
    ReviewRequest,
    Schedule,
    StandingsOut,
    Team,
)
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, caller, get_db, optional_caller, staff
from gpuarena.service.device_kinds import runner_warnings
from gpuarena.service.offloop import OffLoopRoute

router = APIRouter(prefix="/api/contests", tags=["contests"], route_class=OffLoopRoute)

DB = Annotated[Database, Depends(get_db)]
CALLER = Annotated[Caller, Depends(caller)]
MAYBE = Annotated[Caller | None, Depends(optional_caller)]
STAFF = Annotated[Caller, Depends(staff)]
"""An organiser or admin, checked before the request's body is validated: a participant's
oversized contest file is refused at once, never validated."""


@router.post("", status_code=201)
def create_contest(who: STAFF, spec: ContestSpec, db: DB) -> ContestInfo:
    """Organisers and admins: a new contest from its file (`gpuarena contest create contest.toml`).
    Every mistake is named at once; a device kind no runner serves yet is allowed, with a warning."""
    with db.write() as session:
        made = contests.info(session, contests.create(session, who, spec))
        made.warnings = runner_warnings(session, spec.device_kinds)
        return made


@router.get("")
def list_contests(db: DB) -> list[ContestInfo]:
    with db.read() as session:
        return contests.listed(session)


@router.get("/{slug}")
def get_contest(slug: str, db: DB) -> ContestInfo:
    with db.read() as session:
        return contests.info(session, contests.get(session, slug))


@router.put("/{slug}/teams")
def set_team(slug: str, team: Team, who: CALLER, db: DB) -> ContestInfo:
    """The contest's organizers: add a team (a named set of users) or replace its members."""
    with db.write() as session:
        row = contests.get(session, slug)
        contests.set_team(session, row, who, team)
        return contests.info(session, row)


@router.put("/{slug}/schedule")
def set_schedule(slug: str, schedule: Schedule, who: CALLER, db: DB) -> ContestInfo:
    """The contest's organizers: move its end (extend it, or end it now) and its freeze; the
    results its freeze holds are then held until the new end."""
    with db.write() as session:
        row = contests.get(session, slug)
        contest_schedule.reschedule(session, row, who, schedule)
        return contests.info(session, row)


@router.get("/{slug}/standings", response_model=StandingsOut)
def get_standings(slug: str, db: DB, who: MAYBE, live: bool = False) -> Response:
    """The standings under the contest's rule, each row with the tie rule that decided its place.
    During a freeze the public ones stop at the freeze; `live=true` is for its organizers."""
    with db.read() as session:
        row = contests.get(session, slug)
        contest_id, frozen_view = row.id, contest_standings.shown_frozen(session, row, who, live)
    # computed beside this process, so that other requests do not wait on it (standings_process.py)
    body = standings_process.standings_json(db, contest_id, frozen_view)
    return Response(body, media_type="application/json")


@router.get("/{slug}/standings.csv", response_class=Response, responses={200: {"content": {"text/csv": {}}}})
def get_standings_csv(slug: str, db: DB, who: MAYBE, live: bool = False) -> Response:
    with db.read() as session:
        shown = contest_standings.standings(session, contests.get(session, slug), who, live)
    return Response(
        contest_standings.standings_csv(shown.standings),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{slug}-standings.csv"'},
    )


@router.get("/{slug}/entries")
def list_entries(
    slug: str,
    who: CALLER,
    db: DB,
    review: Literal["pending", "accepted", "rejected"] | None = None,
    passed: bool = False,
) -> list[EntryOut]:
    """Entries newest first with their review and resubmission flag: all of them for the
    contest's organizers (the review queue: `review=pending&passed=true`), your own otherwise."""
    with db.read() as session:
        return contests.entries(session, contests.get(session, slug), who, review, passed)


@router.post("/{slug}/entries/{submission_id}/review")
def review_entry(slug: str, submission_id: int, body: ReviewRequest, who: CALLER, db: DB) -> EntryOut:
    """The contest's organizers: accept or reject an entry with a comment the contestant sees,
    and set what the rule reads from a review (merged upstream, bonus items, samples, judge score)."""
    with db.write() as session:
        row = contests.get(session, slug)
        contests.review(session, row, who, submission_id, body)
        return next(e for e in contests.entries(session, row, who) if e.submission_id == submission_id)


@router.get("/{slug}/similar")
def similar_pairs(
    slug: str, who: CALLER, db: DB, threshold: Annotated[float, Query(ge=0, le=1)] = 0.5
) -> list[SimilarPair]:
    """The contest's organizers: pairs of different contestants' solutions to one problem
    whose code is alike (renaming and reformatting do not hide it). A flag, not a verdict."""
    with db.read() as session:
        return contests.similar(session, contests.get(session, slug), who, threshold)
