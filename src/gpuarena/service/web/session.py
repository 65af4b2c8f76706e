"""Who is looking at a page: the account behind the session cookie, if any.

Signing in means pasting an API token; the server keeps a session (a web_sessions row: the
token's id and the SHA-256 of a random key) and the signed cookie carries only the key. Each
request checks the session is neither signed out nor expired and its token still live, so
signing out, or revoking the token, ends the session on the server: a copy of the cookie
taken before then signs nobody in.
"""

from __future__ import annotations

import datetime as dt
import secrets

from fastapi import Depends, Request
from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from gpuarena.service.auth import AuthError, authenticate, hash_token
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.tables import Token, WebSession, utcnow
from gpuarena.service.web.security import SESSION_DAYS, rotate_csrf

SESSION_KEY = "session_key"
"""The cookie's field with the session's random key (its SHA-256 is the web_sessions row's)."""


class SignInRequired(Exception):
    """The page needs a signed-in account (answered with a redirect to the sign-in form)."""


class NotAllowed(Exception):
    """Signed in, but this account may not see or do this (HTTP 403)."""


def _live(token: Token | None) -> bool:
    if token is None or token.revoked_at is not None:
        return False
    return token.expires_at is None or token.expires_at > utcnow()


def viewer(request: Request, db: Database = Depends(get_db)) -> Caller | None:
    """The signed-in account, or None; a session signed out, expired or whose token died is
    cleared (and a cookie from before sessions were kept on the server signs nobody in)."""
    request.session.pop("token_id", None)
    key = request.session.get(SESSION_KEY)
    if not isinstance(key, str):
        return None
    with db.read() as session:
        row = session.scalar(select(WebSession).where(WebSession.hash == hash_token(key)))
        if row is None or row.revoked_at is not None or row.expires_at <= utcnow() or not _live(row.token):
            request.session.pop(SESSION_KEY, None)
            return None
        token = row.token
        return Caller(
            user_id=token.user_id,
            name=token.user.name,
            role=token.user.role,
            token_id=token.id,
            device_kinds=tuple(token.device_kinds) if token.device_kinds is not None else None,
        )


def signed_in(who: Caller | None = Depends(viewer)) -> Caller:
    if who is None:
        raise SignInRequired()
    return who


def admin_viewer(who: Caller = Depends(signed_in)) -> Caller:
    if who.role != "admin":
        raise NotAllowed(f"{who.name} is a {who.role}; this page is for admins")
    return who


def sign_in(request: Request, db: Database, plain_token: str) -> Caller:
    """Check a pasted token and bind the session to it; AuthError says what is wrong."""
    plain = plain_token.strip()
    if not plain:
        raise AuthError("token: paste an API token (`gpuarena users add NAME` prints one)")
    with db.read() as session:
        try:
            token = authenticate(session, plain)
        except AuthError as exc:  # the API's hint is for the CLI; on the page, say what to do here
            if "unknown token" in str(exc):
                raise AuthError(
                    "this token is not known here: paste the whole token (it starts with gpa_), "
                    "or ask an admin of this server for a new one"
                ) from None
            raise
        if token.user.role == "runner":
            raise AuthError(
                f"token {token.prefix}… belongs to the runner account {token.user.name!r}; "
                "sign in with a person's token"
            )
        who = Caller(
            user_id=token.user_id, name=token.user.name, role=token.user.role, token_id=token.id, device_kinds=None
        )
    key = secrets.token_urlsafe(32)
    now = utcnow()
    with db.write() as session:
        _revoke(session, request)  # whoever this browser was signed in as before
        session.execute(delete(WebSession).where(WebSession.expires_at < now))  # long dead: forget them
        session.add(
            WebSession(hash=hash_token(key), token_id=who.token_id, expires_at=now + dt.timedelta(days=SESSION_DAYS))
        )
    request.session.clear()
    request.session[SESSION_KEY] = key
    rotate_csrf(request)
    return who


def sign_out(request: Request, db: Database) -> None:
    """End the session on the server (a copy of the cookie signs nobody in), then in the browser."""
    with db.write() as session:
        _revoke(session, request)
    request.session.clear()
    rotate_csrf(request)


def _revoke(session: Session, request: Request) -> None:
    key = request.session.get(SESSION_KEY)
    if isinstance(key, str):
        session.execute(
            update(WebSession)
            .where(WebSession.hash == hash_token(key), WebSession.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
