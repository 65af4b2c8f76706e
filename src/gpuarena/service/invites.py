"""Invites: sign-up without shell access. An organiser or admin makes a link (a random code,
shown once, stored as its SHA-256); whoever opens it picks a name and gets an account with the
invite's role and a first token. An invite has a number of uses and may expire or be revoked."""

from __future__ import annotations

import datetime as dt
import secrets

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from gpuarena.errors import GpuarenaError
from gpuarena.service.auth import add_user, hash_token, issue_token
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.tables import Invite, User, utcnow

CODE_PREFIX = "inv_"
INVITE_ROLES = ("participant", "organiser")
"""Roles an invite may give (admins are made on the server, never by a link)."""
MAX_USES = 10_000


def create(
    session: Session, who: Caller, role: str = "participant", uses: int = 1, days: float | None = 7.0, note: str = ""
) -> tuple[Invite, str]:
    """A new invite and its code (shown once). Organisers invite participants; admins may also
    invite organisers."""
    if not who.is_staff:
        raise Forbidden("only organisers and admins make invites")
    if role not in INVITE_ROLES:
        raise GpuarenaError(f"role {role!r}: an invite gives one of {', '.join(INVITE_ROLES)}")
    if role == "organiser" and who.role != "admin":
        raise Forbidden("only admins invite organisers")
    if not 1 <= uses <= MAX_USES:
        raise GpuarenaError(f"uses: {uses}; give 1 to {MAX_USES}")
    if days is not None and not 0 < days <= 365:
        raise GpuarenaError(f"days: {days}; give more than 0 and at most 365 (or none: never expires)")
    if len(note) > 200:
        raise GpuarenaError(f"note: {len(note)} characters; use at most 200")
    code = CODE_PREFIX + secrets.token_urlsafe(24)
    invite = Invite(
        hash=hash_token(code),
        prefix=code[:12],
        role=role,
        uses_left=uses,
        note=note,
        created_by=who.user_id,
        expires_at=utcnow() + dt.timedelta(days=days) if days else None,
    )
    session.add(invite)
    session.flush()
    return invite, code


def find(session: Session, code: str) -> Invite:
    """The live invite with this code, or an error that says why it cannot be used."""
    invite = session.scalar(select(Invite).where(Invite.hash == hash_token(code.strip())))
    if invite is None:
        raise NotFound("this invite link is not known here: check that it was copied whole")
    if invite.revoked_at is not None:
        raise GpuarenaError("this invite was withdrawn by whoever made it")
    if invite.expires_at is not None and invite.expires_at <= utcnow():
        raise GpuarenaError(f"this invite expired on {invite.expires_at:%Y-%m-%d %H:%M} UTC")
    if invite.uses_left <= 0:
        raise GpuarenaError("this invite has been used as many times as it allows")
    return invite


def accept(session: Session, code: str, name: str) -> tuple[User, str]:
    """Use an invite: a new account named `name` with the invite's role, and its first token.
    The use is counted in the same transaction (two people racing for a last use: one wins)."""
    invite = find(session, code)
    taken = session.execute(
        update(Invite).where(Invite.id == invite.id, Invite.uses_left > 0).values(uses_left=Invite.uses_left - 1)
    )
    if taken.rowcount != 1:  # type: ignore[attr-defined]  # an UPDATE gives a CursorResult
        raise GpuarenaError("this invite has been used as many times as it allows")
    user = add_user(session, name.strip(), invite.role)
    _, plain = issue_token(session, user, "first (invite)")
    return user, plain


def revoke(session: Session, who: Caller, invite_id: int) -> Invite:
    invite = session.get(Invite, invite_id)
    if invite is None:
        raise NotFound(f"no invite {invite_id}")
    if invite.created_by != who.user_id and who.role != "admin":
        raise Forbidden("only whoever made an invite, or an admin, withdraws it")
    invite.revoked_at = utcnow()
    return invite


def listed(session: Session, who: Caller) -> list[Invite]:
    """The invites this caller may see: their own; admins all."""
    if not who.is_staff:
        raise Forbidden("only organisers and admins have invites")
    query = select(Invite).order_by(Invite.id.desc())
    if who.role != "admin":
        query = query.where(Invite.created_by == who.user_id)
    return list(session.scalars(query))
