"""The web pages, served by the same process as the JSON API: server-rendered Jinja2
templates, htmx for live updates, and front-end assets shipped inside the package."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.sessions import SessionMiddleware

from gpuarena.service.config import Settings
from gpuarena.service.web import (
    actions,
    bounty_pages,
    contest_pages,
    downloads,
    invite_pages,
    routes,
    sample_pages,
    suite_pages,
)
from gpuarena.service.web.render import STATIC, page
from gpuarena.service.web.security import (
    SESSION_COOKIE,
    SESSION_DAYS,
    CsrfError,
    SecurityHeaders,
    https_only,
    secret_key,
)
from gpuarena.service.web.session import NotAllowed, SignInRequired, viewer
from gpuarena.service.web.views import PageNotFound


def error_page(
    request: Request, status: int, title: str, message: str, headers: dict[str, str] | None = None
) -> HTMLResponse:
    """An error as a page, for a browser (the API answers the same errors as JSON), with the
    header of whoever is signed in (not "Sign in" to someone who is)."""
    who = None
    if "session" in request.scope and getattr(request.app.state, "db", None) is not None:
        try:
            who = viewer(request, request.app.state.db)
        except Exception:  # an error page must render whatever broke
            who = None
    response = page(request, "error.html", who, status_code=status, title=title, message=message)
    response.headers.update(headers or {})
    return response


def not_found(request: Request) -> Response:
    """The page for an address no route serves (the API answers JSON instead); an address with
    a trailing slash goes to the one without."""
    return _without_slash(request) or error_page(request, 404, "Not found", f"There is no page at {request.url.path}.")


def _without_slash(request: Request) -> Response | None:
    """A redirect to the address without its trailing slash, where it has one (GET only)."""
    path = request.url.path
    if request.method not in ("GET", "HEAD") or (path.rstrip("/") or "/") == path:
        return None
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(path.rstrip("/") + query, status_code=308)


def mount(app: FastAPI, settings: Settings) -> None:
    """Add the pages, /static, the session cookie and the security headers to the app."""
    app.include_router(downloads.router)
    app.include_router(invite_pages.router)
    app.include_router(bounty_pages.router)
    app.include_router(contest_pages.router)
    app.include_router(contest_pages.forms)
    app.include_router(sample_pages.router)
    app.include_router(sample_pages.forms)
    app.include_router(suite_pages.router)
    app.include_router(routes.router)
    app.include_router(actions.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(PageNotFound)
    async def _not_found(request: Request, exc: PageNotFound) -> Response:
        return _without_slash(request) or error_page(request, 404, "Not found", str(exc))

    @app.exception_handler(NotAllowed)
    async def _not_allowed(request: Request, exc: NotAllowed) -> Response:
        return error_page(request, 403, "Not allowed", str(exc))

    @app.exception_handler(CsrfError)
    async def _csrf(request: Request, exc: CsrfError) -> Response:
        return error_page(request, 403, "Form refused", str(exc))

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, _exc: SignInRequired) -> Response:
        back = request.url.path if request.method == "GET" else urlsplit(request.headers.get("referer", "/")).path
        return RedirectResponse("/signin?next=" + quote(routes.local_path(back), safe="/"), status_code=303)

    app.add_middleware(SecurityHeaders)
    app.add_middleware(
        SessionMiddleware,
        secret_key=secret_key(settings),
        session_cookie=SESSION_COOKIE,
        max_age=SESSION_DAYS * 24 * 3600,
        same_site="lax",
        https_only=https_only(),
    )
