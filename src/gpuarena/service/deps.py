"""FastAPI dependencies: the database, the settings and the signed-in user."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import update

from gpuarena.service.auth import AuthError, authenticate
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.errors import Forbidden
from gpuarena.service.tables import Token, utcnow

_bearer = HTTPBearer(auto_error=False, description="An API token: `gpuarena users add NAME` prints one.")


def get_db(request: Request) -> Database:
    return request.app.state.db


def get_settings(request: Request) -> Settings:
    return request.app.state.settings


@dataclass(frozen=True)
class Caller:
    """Who is calling: plain values, safe to use after the session that found them closed."""

    user_id: int
    name: str
    role: str
    token_id: int
    device_kinds: tuple[str, ...] | None

    @property
    def is_staff(self) -> bool:
        return self.role in ("admin", "organiser")


def caller(
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer), db: Database = Depends(get_db)
) -> Caller:
    if credentials is None:
        raise AuthError("this needs an API token: send 'Authorization: Bearer <token>'")
    with db.read() as session:
        token: Token = authenticate(session, credentials.credentials)
        found = Caller(
            user_id=token.user_id,
            name=token.user.name,
            role=token.user.role,
            token_id=token.id,
            device_kinds=tuple(token.device_kinds) if token.device_kinds is not None else None,
        )
        stale = token.last_used_at is None or utcnow() - token.last_used_at > dt.timedelta(minutes=1)
    if stale:  # at most one write a minute per token, not one per request
        with db.write() as session:
            session.execute(update(Token).where(Token.id == found.token_id).values(last_used_at=utcnow()))
    return found


def optional_caller(
    credentials: HTTPAuthorizationCredentials | None = Depends(_bearer), db: Database = Depends(get_db)
) -> Caller | None:
    """The caller where a token was sent, None for an anonymous request (pages and records
    anyone may read, with what only some may see left out)."""
    return None if credentials is None else caller(credentials, db)


def staff(who: Caller = Depends(caller)) -> Caller:
    if not who.is_staff:
        raise Forbidden(f"{who.name} is a {who.role}; this needs an admin or organiser")
    return who


def admin(who: Caller = Depends(caller)) -> Caller:
    if who.role != "admin":
        raise Forbidden(f"{who.name} is a {who.role}; this needs an admin")
    return who


def runner_account(who: Caller = Depends(caller)) -> Caller:
    """Runner tokens only, admins' included out: a claim hands out the job's secret seed, which
    only the process that runs the job may hold (an admin serves jobs with a runner account:
    `gpuarena users add NAME --role runner`)."""
    if who.role != "runner":
        raise Forbidden(
            f"{who.name} is a {who.role}; runner endpoints need a runner token "
            "(make one with `gpuarena users add NAME --role runner`)"
        )
    return who
