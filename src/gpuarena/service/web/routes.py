"""The pages people read: home, problems, submissions, users, admin, sign-in and tokens."""

from __future__ import annotations

from typing import Annotated, TypedDict

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from gpuarena.service.contest_schemas import ContestInfo
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.web import views
from gpuarena.service.web.render import page
from gpuarena.service.web.session import admin_viewer, signed_in, viewer

router = APIRouter(include_in_schema=False)
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
MODES = [
    ("ranked", "ranked: secret seed, enters the leaderboard"),
    ("benchmark", "benchmark: timed, public seed"),
    ("test", "test: correctness only"),
    ("profile", "profile: Nsight Compute on one workload (GPU kinds)"),
]


def local_path(target: str | None, default: str = "/") -> str:
    """Only paths on this site are followed after sign-in (no open redirects)."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


@router.get("/", response_class=HTMLResponse)
def home(request: Request, db: DB, who: WHO) -> HTMLResponse:
    return page(request, "home.html", who, home=views.home(db, who))


@router.get("/submissions", response_class=HTMLResponse)
def submissions_page(
    request: Request, db: DB, who: WHO, problem: str = "", user: str = "", device_kind: str = "", status: str = ""
) -> HTMLResponse:
    """Every submission, newest first, filtered by problem, user, device kind and status."""
    from gpuarena.errors import GpuarenaError
    from gpuarena.service.submissions import DONE, IN_FLIGHT, search

    filters = _Filters(
        problem=problem.strip() or None,
        user=user.strip() or None,
        device_kind=device_kind.strip() or None,
        status=status.strip() or None,
    )
    error, rows = "", []
    with db.read() as session:
        try:
            rows = search(session, **filters, limit=SUBMISSIONS_SHOWN, viewer=who)
        except GpuarenaError as exc:  # an unknown user: say so above an empty list
            error = str(exc)
    return page(
        request,
        "submissions.html",
        who,
        rows=rows,
        f=filters,
        error=error,
        limit=SUBMISSIONS_SHOWN,
        statuses=[*IN_FLIGHT, *sorted(DONE)],
    )


SUBMISSIONS_SHOWN = 200


class _Filters(TypedDict):
    """The submissions page's filters (submissions.search's keywords; None: any)."""

    problem: str | None
    user: str | None
    device_kind: str | None
    status: str | None


@router.get("/problems", include_in_schema=False)
def problems() -> RedirectResponse:
    """The problems are listed on the home page."""
    return RedirectResponse("/#problems", status_code=303)


def _open_contests(db: Database, who: Caller | None, slug: str) -> list[ContestInfo]:
    """The submit form's contest choices (contests.open_for); none without a viewer."""
    from gpuarena.service.contests import open_for

    if who is None:
        return []
    with db.read() as session:
        return open_for(session, who, slug)


def problem_response(
    request: Request,
    db: Database,
    who: Caller | None,
    slug: str,
    error: str = "",
    form: dict[str, str] | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """The problem page; the submit action re-renders it with the error and what was typed."""
    from gpuarena.service.submissions import search

    shown = views.problem_page(db, slug, who)
    mine = []
    if who is not None:
        with db.read() as session:
            mine = search(session, user=who.name, problem=shown.slug, limit=10, viewer=who)
    return page(
        request,
        "problem.html",
        who,
        status_code=status_code,
        p=shown,
        modes=MODES,
        can_manage=views.may_manage(db, who, shown.slug),
        error=error,
        form=form or {},
        mine=mine,
        contests=_open_contests(db, who, shown.slug),
    )


@router.get("/problems/{slug:path}", response_class=HTMLResponse)
def problem(slug: str, request: Request, db: DB, who: WHO) -> HTMLResponse:
    return problem_response(request, db, who, slug)


@router.get("/submissions/{submission_id}", response_class=HTMLResponse)
def submission(submission_id: int, request: Request, db: DB, who: WHO) -> HTMLResponse:
    return page(request, "submission.html", who, s=views.submission_page(db, submission_id, who))


@router.get("/submissions/{submission_id}/live", response_class=HTMLResponse)
def submission_live(submission_id: int, request: Request, db: DB, who: WHO) -> HTMLResponse:
    """The fragment htmx polls: status while waiting, the whole result once done (and then
    it stops polling, because the result carries no trigger)."""
    return page(request, "_live.html", who, s=views.submission_page(db, submission_id, who))


@router.get("/users/{name:path}", response_class=HTMLResponse)
def user(name: str, request: Request, db: DB, who: WHO) -> HTMLResponse:
    return page(request, "user.html", who, u=views.user_page(db, name, who=who))


@router.get("/admin", response_class=HTMLResponse)
def admin(request: Request, db: DB, who: Annotated[Caller, Depends(admin_viewer)]) -> HTMLResponse:
    return page(request, "admin.html", who, a=views.admin_page(db))


@router.get("/signin", response_class=HTMLResponse)
def signin_form(request: Request, who: WHO) -> HTMLResponse:
    return page(request, "signin.html", who, next=local_path(request.query_params.get("next")), error="")


@router.get("/tokens", response_class=HTMLResponse)
def tokens(request: Request, db: DB, who: Annotated[Caller, Depends(signed_in)]) -> HTMLResponse:
    return page(request, "tokens.html", who, tokens=views.tokens_of(db, who.user_id), new_token=None, error="")
