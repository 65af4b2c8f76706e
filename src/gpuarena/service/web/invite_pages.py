"""The invite pages: /join/<code> (pick a name, get an account, signed in, the token shown once)
and /invites (organisers and admins: make, list and withdraw invite links). Every form POST
depends on `check_csrf`: without it a page elsewhere could make an organiser's browser create a
10,000-use invite, or sign a visitor's browser into an account of the page's choosing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, Response

from gpuarena.errors import GpuarenaError
from gpuarena.service import invites
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.web.render import page
from gpuarena.service.web.security import check_csrf
from gpuarena.service.web.session import sign_in, signed_in, viewer

router = APIRouter(include_in_schema=False)
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
STAFF = Annotated[Caller, Depends(signed_in)]
CSRF = [Depends(check_csrf)]


@router.get("/join/{code}", response_class=HTMLResponse)
def join_form(code: str, request: Request, db: DB, who: WHO) -> HTMLResponse:
    with db.read() as session:
        try:
            invite = invites.find(session, code)
        except GpuarenaError as exc:
            return page(request, "join.html", who, status_code=400, code=code, role=None, error=str(exc), token=None)
        return page(request, "join.html", who, code=code, role=invite.role, error="", token=None)


@router.post("/join/{code}", response_class=HTMLResponse, dependencies=CSRF)
def join(code: str, request: Request, db: DB, name: Annotated[str, Form()] = "") -> HTMLResponse:
    """An account from the invite, signed in at once; its token is shown once, for the CLI."""
    try:
        with db.write() as session:
            user, plain = invites.accept(session, code, name)
            role = user.role
    except GpuarenaError as exc:
        return page(
            request, "join.html", None, status_code=400, code=code, role="?", error=str(exc), token=None, name=name
        )
    who = sign_in(request, db, plain)
    return page(request, "join.html", who, code=code, role=role, error="", token=plain)


def _invites_page(
    request: Request, db: Database, who: Caller, new: str = "", error: str = "", status_code: int = 200
) -> HTMLResponse:
    with db.read() as session:
        rows = invites.listed(session, who)
    link = str(request.base_url).rstrip("/") + f"/join/{new}" if new else ""
    return page(request, "invites.html", who, status_code=status_code, invites=rows, link=link, error=error)


@router.get("/invites", response_class=HTMLResponse)
def invites_page(request: Request, db: DB, who: STAFF) -> HTMLResponse:
    return _invites_page(request, db, who)


@router.post("/invites", response_class=HTMLResponse, dependencies=CSRF)
def make_invite(
    request: Request,
    db: DB,
    who: STAFF,
    role: Annotated[str, Form()] = "participant",
    uses: Annotated[str, Form()] = "1",
    days: Annotated[str, Form()] = "7",
    note: Annotated[str, Form()] = "",
) -> Response:
    try:
        count = int(uses)
        lifetime = float(days) if days.strip() else None
    except ValueError:
        return _invites_page(
            request, db, who, error=f"uses {uses!r} and days {days!r} must be numbers", status_code=400
        )
    try:
        with db.write() as session:
            _, code = invites.create(session, who, role, count, lifetime, note.strip())
    except GpuarenaError as exc:
        return _invites_page(request, db, who, error=str(exc), status_code=400)
    return _invites_page(request, db, who, new=code)


@router.post("/invites/{invite_id}/revoke", dependencies=CSRF)
def revoke_invite(invite_id: int, request: Request, db: DB, who: STAFF) -> Response:
    with db.write() as session:
        invites.revoke(session, who, invite_id)
    return _invites_page(request, db, who)
