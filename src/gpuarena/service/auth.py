"""Accounts and API tokens. A token is random, shown once, and stored only as its SHA-256."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import secrets

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpuarena.errors import GpuarenaError
from gpuarena.service.tables import Token, User, utcnow

ROLES = ("admin", "organiser", "participant", "runner")
TOKEN_PREFIX = "gpa_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class AuthError(GpuarenaError):
    """The request's credentials are missing, wrong, revoked or expired (HTTP 401)."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def check_user_name(name: str) -> str:
    if not _NAME.match(name):
        raise GpuarenaError(
            f"user name {name!r}: use 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return name


def add_user(session: Session, name: str, role: str = "participant") -> User:
    check_user_name(name)
    if role not in ROLES:
        raise GpuarenaError(f"role {role!r}: use one of {', '.join(ROLES)}")
    existing = session.scalar(select(User).where(func.lower(User.name) == name.lower()))
    if existing is not None:
        raise GpuarenaError(
            f"user {name!r} already exists"
            if existing.name == name
            else f"user {name!r} would be mistaken for the existing {existing.name!r}: names differ in more than case"
        )
    user = User(name=name, role=role)
    session.add(user)
    session.flush()
    return user


def issue_token(
    session: Session,
    user: User,
    name: str = "",
    expires_in: dt.timedelta | None = None,
    device_kinds: list[str] | None = None,
) -> tuple[Token, str]:
    """Create a token; returns the row and the plain token, which is never stored."""
    if len(name) > 64:
        raise GpuarenaError(f"token name: {len(name)} characters; use at most 64")
    plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = Token(
        user_id=user.id,
        name=name,
        prefix=plain[:12],
        hash=hash_token(plain),
        device_kinds=device_kinds,
        expires_at=utcnow() + expires_in if expires_in else None,
    )
    session.add(token)
    session.flush()
    return token, plain


def authenticate(session: Session, plain: str) -> Token:
    """The live token matching plain, or AuthError saying why not."""
    token = session.scalar(select(Token).where(Token.hash == hash_token(plain)))
    if token is None:
        raise AuthError("unknown token (check GPUARENA_TOKEN or run `gpuarena login`)")
    if token.revoked_at is not None:
        raise AuthError(f"token {token.prefix}… was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC")
    if token.expires_at is not None and token.expires_at <= utcnow():
        raise AuthError(f"token {token.prefix}… expired on {token.expires_at:%Y-%m-%d %H:%M} UTC")
    return token


def revoke_token(session: Session, token_id: int, owner: User | None = None) -> Token:
    token = session.get(Token, token_id)
    if token is None or (owner is not None and token.user_id != owner.id):
        raise GpuarenaError(f"no token with id {token_id}" + (" among yours" if owner else ""))
    if token.revoked_at is None:
        token.revoked_at = utcnow()
    return token


def user_by_name(session: Session, name: str) -> User:
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise GpuarenaError(f"no user named {name!r} (create one with `gpuarena users add {name}`)")
    return user
