"""The forms the pages send: sign-in and sign-out, submissions, problem settings, tokens.

Every POST here depends on `check_csrf`; a form without this session's token is refused
before anything else runs."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, get_args

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import update

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena.contracts.records import Mode
from gpuarena.errors import GpuarenaError
from gpuarena.service import auth, submissions
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db, get_settings
from gpuarena.service.schemas import SubmissionRequest
from gpuarena.service.tables import Problem, User
from gpuarena.service.web import views
from gpuarena.service.web.render import page
from gpuarena.service.web.routes import local_path, problem_response
from gpuarena.service.web.security import check_csrf
from gpuarena.service.web.session import NotAllowed, sign_in, sign_out, signed_in, viewer
from gpuarena.solutions.loader import solution_from_upload
from gpuarena.solutions.model import Solution

router = APIRouter(include_in_schema=False, dependencies=[Depends(check_csrf)])
DB = Annotated[Database, Depends(get_db)]
SETTINGS = Annotated[Settings, Depends(get_settings)]
SIGNED_IN = Annotated[Caller, Depends(signed_in)]


def _back(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


@router.post("/signin", response_class=HTMLResponse)
def signin(
    request: Request, db: DB, token: Annotated[str, Form()] = "", next: Annotated[str, Form()] = "/"
) -> Response:
    try:
        sign_in(request, db, token)
    except GpuarenaError as exc:
        return page(request, "signin.html", None, status_code=401, next=local_path(next), error=str(exc))
    return _back(local_path(next))


@router.post("/signout")
def signout(request: Request, db: DB) -> Response:
    sign_out(request, db)
    return _back("/")


def _solution(filename: str, code: str, file: UploadFile | None, limit: int) -> Solution:
    """The uploaded file if one was chosen, else the pasted code; the error names the field."""
    if file is not None and file.filename:
        data = file.file.read(limit + 1)
        if len(data) > limit:
            raise GpuarenaError(f"file: {file.filename} is larger than {limit} bytes")
        if data:
            return solution_from_upload(file.filename, data)
    if code.strip():  # browsers send a textarea's lines with CRLF: store what the author typed
        return solution_from_upload(filename.strip() or "solution.py", code.replace("\r\n", "\n").encode())
    raise GpuarenaError("solution: choose a file to upload or paste your code (a .py file defining solve())")


@router.post("/submit", response_class=HTMLResponse)
async def submit(
    request: Request,
    db: DB,
    settings: SETTINGS,
    who: SIGNED_IN,
    problem: Annotated[str, Form()],
    device_kind: Annotated[str, Form()] = "",
    mode: Annotated[str, Form()] = "ranked",
    contest: Annotated[str, Form()] = "",
    code: Annotated[str, Form()] = "",
    filename: Annotated[str, Form()] = "solution.py",
    file: Annotated[UploadFile | None, File()] = None,
) -> Response:
    """Queue a solution from the problem page's form (entered into the contest chosen, if one
    is), then show its submission page."""
    typed = dict(device_kind=device_kind, mode=mode, contest=contest, code=code, filename=filename)
    try:
        if mode not in get_args(Mode):
            raise GpuarenaError(f"mode {mode!r}: choose one of {', '.join(get_args(Mode))}")
        if not device_kind:
            raise GpuarenaError("device kind: choose one (a kind appears once a runner with that device connects)")
        solution = await run_in_threadpool(_solution, filename, code, file, settings.max_request_bytes)
        made = await run_in_threadpool(
            submissions.create,
            db,
            settings,
            who,
            SubmissionRequest(
                problem=problem, device_kind=device_kind, mode=mode, solution=solution, contest=contest or None
            ),
        )
    except GpuarenaError as exc:
        return await run_in_threadpool(problem_response, request, db, who, problem, str(exc), typed, 400)
    return _back(f"/submissions/{made.id}")


@router.post("/submissions/{submission_id}/cancel")
def cancel_submission(submission_id: int, db: DB, who: SIGNED_IN) -> Response:
    """The submission page's Cancel button (its author, admins); refusals are error pages."""
    submissions.cancel(db, who, submission_id)
    return _back(f"/submissions/{submission_id}")


@router.post("/problem-settings")
def problem_settings(
    request: Request,
    db: DB,
    who: Annotated[Caller | None, Depends(viewer)],
    problem: Annotated[str, Form()],
    solutions_public: Annotated[str, Form()] = "",
    owner: Annotated[str | None, Form()] = None,
) -> Response:
    """Open or close a problem's solutions (its owner, admins); admins also set the owner. Every
    version of the problem changes, so older submissions follow the same rule."""
    if not views.may_manage(db, who, problem):
        raise NotAllowed("only the problem's owner and admins change who sees its solutions")
    assert who is not None
    try:
        with db.write() as session:
            values: dict[str, object] = {"solutions_public": solutions_public == "on"}
            if owner is not None and who.role == "admin":
                values["owner_id"] = auth.user_by_name(session, owner.strip()).id if owner.strip() else None
            session.execute(update(Problem).where(Problem.slug == problem).values(**values))
    except GpuarenaError as exc:
        return problem_response(request, db, who, problem, f"owner: {exc}", status_code=400)
    return _back(f"/problems/{problem}")


@router.post("/tokens", response_class=HTMLResponse)
def create_token(
    request: Request,
    db: DB,
    who: SIGNED_IN,
    name: Annotated[str, Form()] = "",
    expires_in_days: Annotated[str, Form()] = "",
) -> Response:
    """A new API token, shown once on the page that answers."""
    error, plain = "", None
    try:
        days = float(expires_in_days) if expires_in_days.strip() else None
        if days is not None and not 0 < days <= 3650:
            raise ValueError
    except ValueError:
        error = f"expires in days: {expires_in_days!r} is not a number of days between 0 and 3650 (leave empty: never)"
    if len(name) > 64:
        error = f"name: {len(name)} characters; use at most 64"
    if not error:
        with db.write() as session:
            user = session.get(User, who.user_id)
            assert user is not None
            _, plain = auth.issue_token(session, user, name.strip(), dt.timedelta(days=days) if days else None)
    return page(
        request,
        "tokens.html",
        who,
        status_code=400 if error else 201,
        tokens=views.tokens_of(db, who.user_id),
        new_token=plain,
        error=error,
    )


@router.post("/tokens/{token_id}/revoke")
def revoke_token(token_id: int, request: Request, db: DB, who: SIGNED_IN) -> Response:
    """Revoke one of your tokens; revoking the one this browser signed in with signs it out."""
    try:
        with db.write() as session:
            auth.revoke_token(session, token_id, session.get(User, who.user_id))
    except GpuarenaError as exc:
        return page(
            request,
            "tokens.html",
            who,
            status_code=404,
            tokens=views.tokens_of(db, who.user_id),
            new_token=None,
            error=str(exc),
        )
    return _back("/tokens" if token_id != who.token_id else "/signin")
