"""The contest pages: the list, a contest's page (countdown, problems, standings with the tie
rule that decided each place, per-problem best, your entries), and the organizers' pages
(new contest form, moving the end, review queue, similarity pairs side by side, live standings
in a freeze).
Every form POST depends on `check_csrf`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from gpuarena.contests.model import BONUS_ITEMS
from gpuarena.errors import GpuarenaError
from gpuarena.service import contest_schedule, contest_standings, contests
from gpuarena.service.contest_schemas import ReviewRequest, Schedule, parse_contest
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.device_kinds import runner_warnings
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.tables import ContestEntry, ContestRow, SolutionBlob, Submission
from gpuarena.service.web.flash import just_created, note_created
from gpuarena.service.web.render import page
from gpuarena.service.web.security import check_csrf
from gpuarena.service.web.session import NotAllowed, signed_in, viewer
from gpuarena.service.web.views import PageNotFound

router = APIRouter(include_in_schema=False)
forms = APIRouter(include_in_schema=False, dependencies=[Depends(check_csrf)])
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
SIGNED_IN = Annotated[Caller, Depends(signed_in)]

EXAMPLE = """slug = "spring-2027"
title = "Spring kernels"
description = "Fastest **softmax** wins."
start = 2027-03-01T00:00:00Z
end = 2027-03-15T00:00:00Z
problems = ["level1/softmax"]
device_kinds = ["cpu"]
freeze_hours = 24
daily_submission_limit = 20
organizers = []

[rule]
name = "fastest"          # fastest, fast_p, ccf-kernel, ccf-dataset or ccf-migration
aggregation = "points"    # fastest: points or geomean
"""


def _contest(session: Session, slug: str) -> ContestRow:
    try:
        return contests.get(session, slug)
    except NotFound as exc:
        raise PageNotFound(str(exc)) from None


def _organizer(session: Session, row: ContestRow, who: Caller) -> None:
    try:
        contests.require_organizer(session, row, who)
    except Forbidden as exc:
        raise NotAllowed(str(exc)) from None


@router.get("/contests", response_class=HTMLResponse)
def contests_page(request: Request, db: DB, who: WHO) -> HTMLResponse:
    with db.read() as session:
        listed = contests.listed(session)
    return page(request, "contests.html", who, contests=listed)


def _new_page(request: Request, who: Caller, text: str, error: str = "", status_code: int = 200) -> HTMLResponse:
    return page(request, "contest_new.html", who, status_code=status_code, text=text, error=error)


@router.get("/contests/new", response_class=HTMLResponse)
def new_contest_form(request: Request, who: SIGNED_IN) -> HTMLResponse:
    if not who.is_staff:
        raise NotAllowed("creating a contest needs an organiser or admin account")
    return _new_page(request, who, EXAMPLE)


@forms.post("/contests/new", response_class=HTMLResponse)
def new_contest(request: Request, db: DB, who: SIGNED_IN, spec: Annotated[str, Form()] = "") -> Response:
    """The organizer's form: the contest file's TOML; a mistake comes back with the text kept."""
    try:
        parsed = parse_contest(spec, "toml", "the contest")
        with db.write() as session:
            row = contests.create(session, who, parsed)
            slug = row.slug
    except (GpuarenaError, Forbidden) as exc:
        return _new_page(request, who, spec, str(exc), status_code=400 if not isinstance(exc, Forbidden) else 403)
    note_created(request, f"/contests/{slug}")  # its page says what the API warns of
    return RedirectResponse(f"/contests/{slug}", status_code=303)


@router.get("/contests/{slug}", response_class=HTMLResponse)
def contest_page(slug: str, request: Request, db: DB, who: WHO, live: bool = False) -> HTMLResponse:
    """Just made with the form (web/session.py's note), it shows its organizers the API's
    warnings (a device kind no runner serves yet)."""
    created = just_created(request)
    with db.read() as session:
        row = _contest(session, slug)
        info = contests.info(session, row)
        organizer = contests.is_organizer(session, row, who)
        warnings = runner_warnings(session, info.spec.device_kinds) if created and organizer else []
        shown = contest_standings.standings(session, row, who, live=live and organizer)
        mine = contests.entries(session, row, who)[:50] if who is not None and not organizer else []
    problems = sorted({k for r in shown.standings.rows for k in r.breakdown})
    figures = sorted({k for r in shown.standings.rows for k in r.figures})
    return page(
        request,
        "contest.html",
        who,
        c=info,
        s=info.spec,
        shown=shown,
        organizer=organizer,
        mine=mine,
        problems=problems,
        figures=figures,
        warnings=warnings,
        error=request.query_params.get("error", ""),
    )


@router.get("/contests/{slug}/review", response_class=HTMLResponse)
def review_page(slug: str, request: Request, db: DB, who: SIGNED_IN, show: str = "pending") -> HTMLResponse:
    """The review queue: passed runs waiting for a decision (or every entry, show=all)."""
    with db.read() as session:
        row = _contest(session, slug)
        _organizer(session, row, who)
        spec = contests.spec_of(row)
        rows = contests.entries(
            session, row, who, review="pending" if show == "pending" else None, passed_only=show == "pending"
        )
    return page(
        request,
        "contest_review.html",
        who,
        s=spec,
        rows=rows,
        show=show,
        bonus_items=BONUS_ITEMS,
        error=request.query_params.get("error", ""),
    )


@forms.post("/contests/{slug}/review/{submission_id}")
def review_entry(
    slug: str,
    submission_id: int,
    db: DB,
    who: SIGNED_IN,
    decision: Annotated[str, Form()],
    comment: Annotated[str, Form()] = "",
    merged: Annotated[str, Form()] = "",
    bonus: Annotated[list[str] | None, Form()] = None,
    samples_accepted: Annotated[str, Form()] = "",
    samples_score: Annotated[str, Form()] = "",
    judge_score: Annotated[str, Form()] = "",
    completeness: Annotated[str, Form()] = "",
    show: Annotated[str, Form()] = "pending",
) -> Response:
    from urllib.parse import quote

    back = f"/contests/{slug}/review?show={quote(show)}"
    try:
        numbers = {
            name: kind(text)
            for name, kind, text in (
                ("samples_accepted", int, samples_accepted),
                ("samples_score", float, samples_score),
                ("judge_score", float, judge_score),
                ("completeness", float, completeness),
            )
            if text.strip()
        }
        request = ReviewRequest(
            decision=decision, comment=comment.strip(), merged_upstream=merged == "on", bonus=bonus or [], **numbers
        )
        with db.write() as session:
            row = _contest(session, slug)
            _organizer(session, row, who)
            contests.review(session, row, who, submission_id, request)
    except (ValueError, GpuarenaError) as exc:
        return RedirectResponse(back + "&error=" + quote(f"submission {submission_id}: {exc}"), status_code=303)
    return RedirectResponse(back, status_code=303)


@forms.post("/contests/{slug}/schedule")
def move_end(
    slug: str,
    db: DB,
    who: SIGNED_IN,
    end: Annotated[str, Form()] = "",
    freeze_from: Annotated[str, Form()] = "",
    end_now: Annotated[str, Form()] = "",
) -> Response:
    """The organizers' form on the contest's page: a new end (UTC), or the contest ended now."""
    from urllib.parse import quote

    back = f"/contests/{quote(slug)}"
    try:
        schedule = Schedule(end="now" if end_now else end.strip(), freeze_from=freeze_from.strip() or None)
        with db.write() as session:
            row = _contest(session, slug)
            _organizer(session, row, who)
            contest_schedule.reschedule(session, row, who, schedule)
    except (ValueError, GpuarenaError) as exc:
        return RedirectResponse(back + "?error=" + quote(str(exc).split("\n")[0][:300]), status_code=303)
    return RedirectResponse(back, status_code=303)


@router.get("/contests/{slug}/similar", response_class=HTMLResponse)
def similar_page(slug: str, request: Request, db: DB, who: SIGNED_IN, threshold: float = 0.5) -> HTMLResponse:
    with db.read() as session:
        row = _contest(session, slug)
        _organizer(session, row, who)
        pairs = contests.similar(session, row, who, max(0.0, min(1.0, threshold)))
    return page(request, "contest_similar.html", who, slug=slug, pairs=pairs, threshold=threshold)


@router.get("/contests/{slug}/similar/{first}/{second}", response_class=HTMLResponse)
def side_by_side(slug: str, first: int, second: int, request: Request, db: DB, who: SIGNED_IN) -> HTMLResponse:
    """Two entries' code next to each other, for an organizer judging a similarity flag."""
    with db.read() as session:
        row = _contest(session, slug)
        _organizer(session, row, who)
        sides = []
        for sid in (first, second):
            entry = session.get(ContestEntry, sid)
            if entry is None or entry.contest_id != row.id:
                raise PageNotFound(f"submission {sid} is not an entry of {slug}")
            submission = session.get(Submission, sid)
            assert submission is not None  # an entry's id is its submission's (a foreign key)
            blob = session.get(SolutionBlob, submission.solution_hash)
            sides.append({"id": sid, "contestant": entry.contestant, "files": dict(blob.sources) if blob else {}})
    return page(request, "contest_side_by_side.html", who, slug=slug, sides=sides)
