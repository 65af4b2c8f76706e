"""The bounty board's JSON API: list and read (no token needed), post (organisers), claim,
renew, release, submit, verify, pay and withdraw, and the board as CSV or JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from sqlalchemy.orm import Session

from gpuarena.service import bounties, bounty_views
from gpuarena.service.bounty_schemas import (
    BountyDetail,
    BountyOut,
    BountyRequest,
    Category,
    NoteRequest,
    State,
    board_csv,
)
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, caller, get_db
from gpuarena.service.device_kinds import runner_warnings
from gpuarena.service.offloop import OffLoopRoute
from gpuarena.service.tables import Bounty

router = APIRouter(prefix="/api/bounties", tags=["bounties"], route_class=OffLoopRoute)
DB = Annotated[Database, Depends(get_db)]
CALLER = Annotated[Caller, Depends(caller)]


@router.get("")
def list_bounties(db: DB, state: State | None = None, category: Category | None = None) -> list[BountyOut]:
    """The board, newest first: by state (open, claimed, ...) and category (speed, feature, bug, hardware)."""
    bounties.refresh(db)
    with db.read() as session:
        return bounty_views.board(session, state, category)


def export_board(db: Database, fmt: Literal["csv", "json"], state: str | None, category: str | None) -> Response:
    """The board as a file: CSV (one row per bounty) or JSON (each with its history)."""
    bounties.refresh(db)
    with db.read() as session:
        rows = bounty_views.board(session, state, category)
        events = bounty_views.history(session, [b.id for b in rows]) if fmt == "json" else {}
    if fmt == "json":
        records: list[dict[str, Any]] = [
            {**b.model_dump(mode="json"), "history": [e.model_dump(mode="json") for e in events[b.id]]} for b in rows
        ]
        body, media = json.dumps(records, indent=2) + "\n", "application/json"
    else:
        body, media = board_csv(b.model_dump(mode="json") for b in rows), "text/csv; charset=utf-8"
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="bounties.{fmt}"'})


@router.get("/export.{fmt}", response_description="the board as a CSV or JSON file")
def export(
    fmt: Literal["csv", "json"], db: DB, state: State | None = None, category: Category | None = None
) -> Response:
    """The board as CSV (one row per bounty) or JSON (every field and each bounty's history)."""
    return export_board(db, fmt, state, category)


@router.get("/{bounty_id}")
def get_bounty(bounty_id: int, db: DB) -> BountyDetail:
    """One bounty with its history: every change, who made it and when."""
    bounties.refresh(db)
    with db.read() as session:
        return bounty_views.detail(session, bounty_id)


def _changed(db: Database, change: Callable[[Session], Bounty]) -> BountyDetail:
    """Run one change in a write transaction and answer the bounty as it now is."""
    with db.write() as session:
        bounty_id = change(session).id
        session.flush()
        return bounty_views.detail(session, bounty_id)


@router.post("", status_code=201)
def create_bounty(body: BountyRequest, who: CALLER, db: DB) -> BountyDetail:
    """Post a bounty (organisers and admins). Speed bounties need a current problem that runs on
    their device kind, and a target speed-up over the reference or the leaderboard's best; a
    device kind no runner serves yet is allowed, with a warning in the reply."""
    with db.write() as session:
        bounty = bounties.create(session, who, body)
        session.flush()
        made = bounty_views.detail(session, bounty.id)
        if bounty.device_kind:
            made.warnings = runner_warnings(session, [bounty.device_kind])
        return made


@router.post("/{bounty_id}/claim")
def claim(bounty_id: int, who: CALLER, db: DB) -> BountyDetail:
    """Claim an open bounty: you become its one claimer for its claim_days (renew before it lapses)."""
    return _changed(db, lambda session: bounties.claim(session, who, bounty_id))


@router.post("/{bounty_id}/renew")
def renew(bounty_id: int, who: CALLER, db: DB) -> BountyDetail:
    """Renew your claim: it holds another claim_days from now."""
    return _changed(db, lambda session: bounties.renew(session, who, bounty_id))


@router.post("/{bounty_id}/release")
def release(bounty_id: int, who: CALLER, db: DB, body: NoteRequest | None = None) -> BountyDetail:
    """Give up your claim (organisers: anyone's); the bounty is open again."""
    return _changed(db, lambda session: bounties.release(session, who, bounty_id, body.note if body else ""))


@router.post("/{bounty_id}/submit")
def submit(bounty_id: int, body: NoteRequest, who: CALLER, db: DB) -> BountyDetail:
    """Feature, bug and hardware bounties: tell the organisers your work is done and where it is
    (the note). Speed bounties are submitted by queueing a ranked run."""
    return _changed(db, lambda session: bounties.submit_work(session, who, bounty_id, body.note))


@router.post("/{bounty_id}/verify")
def verify(bounty_id: int, who: CALLER, db: DB, body: NoteRequest | None = None) -> BountyDetail:
    """Organisers: accept the claimer's work on a feature, bug or hardware bounty."""
    return _changed(db, lambda session: bounties.verify(session, who, bounty_id, body.note if body else ""))


@router.post("/{bounty_id}/pay")
def pay(bounty_id: int, who: CALLER, db: DB, body: NoteRequest | None = None) -> BountyDetail:
    """Organisers: record that a verified bounty was paid (the note: the payment's reference)."""
    return _changed(db, lambda session: bounties.pay(session, who, bounty_id, body.note if body else ""))


@router.post("/{bounty_id}/withdraw")
def withdraw(bounty_id: int, who: CALLER, db: DB, body: NoteRequest | None = None) -> BountyDetail:
    """Organisers: take an open, claimed or submitted bounty off the board."""
    return _changed(db, lambda session: bounties.withdraw(session, who, bounty_id, body.note if body else ""))
