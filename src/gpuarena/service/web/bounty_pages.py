"""The bounty board's pages: /bounties (filters by state and category, CSV and JSON export),
/bounties/<id> (details, history, and the buttons the viewer may press) and /bounties/new
(organisers and admins post one). Every form depends on `check_csrf`."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

import pydantic
from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.errors import GpuarenaError
from gpuarena.service import bounties, bounty_views
from gpuarena.service.bounty_schemas import BountyDetail, BountyRequest
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.device_kinds import runner_warnings
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.tables import DeviceKind, Problem
from gpuarena.service.web.flash import just_created, note_created
from gpuarena.service.web.render import page
from gpuarena.service.web.security import check_csrf
from gpuarena.service.web.session import NotAllowed, signed_in, viewer
from gpuarena.service.web.views import PageNotFound

router = APIRouter(include_in_schema=False)
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
SIGNED_IN = Annotated[Caller, Depends(signed_in)]
CSRF = [Depends(check_csrf)]
Action = Literal["claim", "renew", "release", "submit", "verify", "pay", "withdraw"]
STATE_CLASS = {
    "open": "ok",
    "claimed": "wait",
    "submitted": "wait",
    "verified": "ok",
    "paid": "ok",
    "expired": "muted",
    "withdrawn": "muted",
}
"""A colour per state (the word is always shown)."""


@router.get("/bounties", response_class=HTMLResponse)
def board_page(request: Request, db: DB, who: WHO, state: str = "", category: str = "") -> HTMLResponse:
    """The board, filtered by state and category; an unknown filter says so above an empty list."""
    filters = {"state": state.strip(), "category": category.strip()}
    error, rows = "", []
    bounties.refresh(db)
    with db.read() as session:
        try:
            rows = bounty_views.board(session, filters["state"] or None, filters["category"] or None)
        except GpuarenaError as exc:
            error = str(exc)
    query = urlencode({k: v for k, v in filters.items() if v})
    return page(
        request,
        "bounties.html",
        who,
        rows=rows,
        f=filters,
        error=error,
        states=bounties.STATES,
        categories=bounties.CATEGORIES,
        state_class=STATE_CLASS,
        query=f"?{query}" if query else "",
    )


def _staff(who: Caller) -> Caller:
    if not who.is_staff:
        raise NotAllowed(f"{who.name} is a {who.role}; organisers and admins post bounties")
    return who


def _new_form(
    request: Request, db: Database, who: Caller, form: dict[str, str], error: str = "", status_code: int = 200
) -> HTMLResponse:
    with db.read() as session:
        problems = list(
            session.scalars(
                select(Problem.slug).where(Problem.current, Problem.slug != SAMPLES_SLUG).order_by(Problem.slug)
            )
        )
        kinds = list(session.scalars(select(DeviceKind.name).order_by(DeviceKind.name)))
    return page(
        request,
        "bounty_new.html",
        who,
        status_code=status_code,
        form=form,
        error=error,
        problems=problems,
        kinds=kinds,
        categories=bounties.CATEGORIES,
        targets=bounties.TARGETS,
    )


NEW_DEFAULTS = {
    "title": "",
    "description": "",
    "reward_amount": "",
    "currency": "USD",
    "category": "speed",
    "problem": "",
    "device_kind": "",
    "target_over": "reference",
    "target_speedup": "2",
    "claim_days": "7",
    "deadline": "",
}


@router.get("/bounties/new", response_class=HTMLResponse)
def new_form(request: Request, db: DB, who: SIGNED_IN) -> HTMLResponse:
    return _new_form(request, db, _staff(who), dict(NEW_DEFAULTS))


def _request_from(form: dict[str, str]) -> BountyRequest:
    """The form as the API's request: blanks are left out, and a non-speed bounty drops the speed
    fields the form shows for every category. Errors name the field."""
    data: dict[str, Any] = {k: v.strip() for k, v in form.items() if v.strip() and k != "description"}
    data["description"] = form.get("description", "").replace("\r\n", "\n")
    if data.get("category") != "speed":
        for name in ("problem", "device_kind", "target_over", "target_speedup"):
            data.pop(name, None)
    try:
        return BountyRequest.model_validate(data)
    except pydantic.ValidationError as exc:
        raise GpuarenaError(
            "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {str(e['msg']).removeprefix('Value error, ')}"
                for e in exc.errors()[:5]
            )
        ) from None


@router.post("/bounties/new", response_class=HTMLResponse, dependencies=CSRF)
def create(
    request: Request,
    db: DB,
    who: SIGNED_IN,
    title: Annotated[str, Form()] = "",
    description: Annotated[str, Form()] = "",
    reward_amount: Annotated[str, Form()] = "",
    currency: Annotated[str, Form()] = "USD",
    category: Annotated[str, Form()] = "",
    problem: Annotated[str, Form()] = "",
    device_kind: Annotated[str, Form()] = "",
    target_over: Annotated[str, Form()] = "",
    target_speedup: Annotated[str, Form()] = "",
    claim_days: Annotated[str, Form()] = "7",
    deadline: Annotated[str, Form()] = "",
) -> Response:
    """Post a bounty from the form; a refusal shows the form again with what was typed."""
    _staff(who)
    form = dict(
        title=title,
        description=description,
        reward_amount=reward_amount,
        currency=currency,
        category=category,
        problem=problem,
        device_kind=device_kind,
        target_over=target_over,
        target_speedup=target_speedup,
        claim_days=claim_days,
        deadline=deadline,
    )
    try:
        with db.write() as session:
            bounty_id = bounties.create(session, who, _request_from(form)).id
    except GpuarenaError as exc:
        return _new_form(request, db, who, form, str(exc), 400)
    note_created(request, f"/bounties/{bounty_id}")  # its page says what the API warns of
    return RedirectResponse(f"/bounties/{bounty_id}", status_code=303)


def _can(who: Caller | None, b: BountyDetail) -> dict[str, bool]:
    """The buttons this viewer sees (the service checks again when one is pressed)."""
    person = who is not None and who.role != "runner"
    mine = who is not None and b.claimer == who.name
    staff = who is not None and who.is_staff
    held = b.state in bounties.HELD
    return {
        "claim": person and b.state == "open",
        "renew": mine and held,
        "release": held and (mine or staff),
        "submit": mine and b.state == "claimed" and b.category != "speed",
        "verify": staff and held and b.category != "speed",
        "pay": staff and b.state == "verified",
        "withdraw": staff and b.state in bounties.LIVE,
    }


def _bounty_page(
    request: Request,
    db: Database,
    who: Caller | None,
    bounty_id: int,
    error: str = "",
    status_code: int = 200,
    created: bool = False,
) -> HTMLResponse:
    """created: just posted with the form (web/session.py's note); organisers and admins see
    the API's warnings (a device kind no runner serves yet) above it."""
    bounties.refresh(db)
    with db.read() as session:
        try:
            shown = bounty_views.detail(session, bounty_id)
        except NotFound as exc:
            raise PageNotFound(str(exc)) from None
        staff = who is not None and who.is_staff
        warnings = runner_warnings(session, [shown.device_kind]) if created and staff and shown.device_kind else []
    return page(
        request,
        "bounty.html",
        who,
        status_code=status_code,
        b=shown,
        can=_can(who, shown),
        error=error,
        state_class=STATE_CLASS,
        warnings=warnings,
    )


@router.get("/bounties/{bounty_id}", response_class=HTMLResponse)
def bounty_page(bounty_id: int, request: Request, db: DB, who: WHO) -> HTMLResponse:
    return _bounty_page(request, db, who, bounty_id, created=just_created(request))


CHANGES = {
    "claim": lambda s, who, i, note: bounties.claim(s, who, i),
    "renew": lambda s, who, i, note: bounties.renew(s, who, i),
    "release": bounties.release,
    "submit": bounties.submit_work,
    "verify": bounties.verify,
    "pay": bounties.pay,
    "withdraw": bounties.withdraw,
}
"""Each button's change: (session, who, bounty id, note) -> the bounty."""


@router.post("/bounties/{bounty_id}/{action}", response_class=HTMLResponse, dependencies=CSRF)
def change(
    bounty_id: int, action: Action, request: Request, db: DB, who: SIGNED_IN, note: Annotated[str, Form()] = ""
) -> Response:
    """A button on the bounty's page; a refusal shows the page again with the reason."""
    try:
        with db.write() as session:
            CHANGES[action](session, who, bounty_id, note.strip())
    except NotFound as exc:
        raise PageNotFound(str(exc)) from None
    except GpuarenaError as exc:
        return _bounty_page(request, db, who, bounty_id, str(exc), 403 if isinstance(exc, Forbidden) else 400)
    return RedirectResponse(f"/bounties/{bounty_id}", status_code=303)
