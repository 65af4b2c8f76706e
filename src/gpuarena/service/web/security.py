"""Cookie sessions, CSRF tokens and response headers for the web pages.

The JSON API authenticates with bearer tokens only, so a browser's cookies never act on it;
the pages authenticate with a signed session cookie, and every form they accept carries a
per-session CSRF token.
"""

from __future__ import annotations

import hmac
import os
import secrets
import time
from pathlib import Path

from fastapi import Form, Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuarena.errors import GpuarenaError
from gpuarena.service.config import Settings

SECRET_FILE = "web-secret.key"
SESSION_COOKIE = "gpuarena_session"
SESSION_DAYS = 14
CSRF_FIELD = "csrf_token"

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
"""No inline script or style at all: even text that escaped escaping could not run."""


UNTOUCHED = ("/api", "/docs", "/redoc", "/openapi.json")
"""The JSON API and FastAPI's own API docs (which load Swagger UI its own way) keep their headers."""


class CsrfError(Exception):
    """A form arrived without this session's CSRF token (HTTP 403)."""


def secret_key(settings: Settings) -> str:
    """GPUARENA_SECRET_KEY, else a key generated once and kept in <home>/web-secret.key.

    Several API servers behind one address must share the key: set GPUARENA_SECRET_KEY."""
    given = os.environ.get("GPUARENA_SECRET_KEY")
    if given:
        return given
    path = Path(settings.home) / SECRET_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another server process on this home made it first
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(48))
    key = path.read_text().strip()
    for _ in range(50):  # another server process made the file and is still writing it
        if len(key) >= 32:
            break
        time.sleep(0.01)
        key = path.read_text().strip()
    if len(key) < 32:
        raise GpuarenaError(
            f"{path}: the web secret key is shorter than 32 characters "
            "(fix: delete the file and restart to generate one, or set GPUARENA_SECRET_KEY)"
        )
    return key


def https_only() -> bool:
    """Mark the session cookie Secure when the server is reached over HTTPS (GPUARENA_HTTPS=1)."""
    return os.environ.get("GPUARENA_HTTPS", "") in ("1", "true", "yes")


def csrf_token(request: Request) -> str:
    """This session's CSRF token, made on first use; templates put it in every form."""
    token = request.session.get("csrf")
    if not token:
        token = request.session["csrf"] = secrets.token_urlsafe(32)
    return token


def rotate_csrf(request: Request) -> None:
    """A new token at sign-in and sign-out, so one seen before does not carry over."""
    request.session["csrf"] = secrets.token_urlsafe(32)


def check_csrf(request: Request, csrf_token: str = Form("", description="the form's CSRF token")) -> None:
    """Dependency of every form POST: the token must match the session's."""
    expected = request.session.get("csrf")
    if not expected or not csrf_token or not hmac.compare_digest(expected, csrf_token):
        raise CsrfError(
            "this form is missing its security token or the token is stale: reload the page and send the form again"
        )


class SecurityHeaders:
    """Adds CSP and related headers to the pages and their assets (pure ASGI, so the API's
    event streams pass through untouched)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(UNTOUCHED):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [
                    (b"content-security-policy", CSP.encode()),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"same-origin"),
                    (b"x-frame-options", b"DENY"),
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
