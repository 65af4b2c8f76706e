"""Who is looking at a page: the account behind the session cookie, if any.

Signing in means pasting an API token; the session keeps that token's id (never the token),
and each request checks the token is still live, so revoking it signs the browser out too.
"""

from __future__ import annotations

from fastapi import Depends, Request

from gpuarena.service.auth import AuthError, authenticate
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.tables import Token, utcnow
from gpuarena.service.web.security import rotate_csrf


class SignInRequired(Exception):
    """The page needs a signed-in account (answered with a redirect to the sign-in form)."""


class NotAllowed(Exception):
    """Signed in, but this account may not see or do this (HTTP 403)."""


def _live(token: Token | None) -> bool:
    if token is None or token.revoked_at is not None:
        return False
    return token.expires_at is None or token.expires_at > utcnow()


def viewer(request: Request, db: Database = Depends(get_db)) -> Caller | None:
    """The signed-in account, or None; a session whose token died is cleared."""
    token_id = request.session.get("token_id")
    if not isinstance(token_id, int):
        return None
    with db.read() as session:
        token = session.get(Token, token_id)
        if not _live(token):
            request.session.pop("token_id", None)
            return None
        assert token is not None
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
    request.session.clear()
    request.session["token_id"] = who.token_id
    rotate_csrf(request)
    return who


def sign_out(request: Request) -> None:
    request.session.clear()
    rotate_csrf(request)
