"""The FastAPI application: routes, error answers, and a cap on request size."""

from __future__ import annotations

import logging
from typing import Any

import pydantic
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gpuarena import __version__
from gpuarena.errors import GpuarenaError
from gpuarena.service import bounty_routes, contest_routes, live, redact, routes, runner_routes, sample_routes, web
from gpuarena.service.auth import AuthError
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.errors import Forbidden, NotFound, TooLarge, Unavailable
from gpuarena.service.queue import LeaseLost
from gpuarena.service.ratelimit import RateLimited

log = logging.getLogger("gpuarena.service")

STATUS = [
    (AuthError, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (LeaseLost, 409),
    (TooLarge, 413),
    (RateLimited, 429),
    (Unavailable, 503),
    (GpuarenaError, 400),
]
"""Which error answers with which status; the first match wins (GpuarenaError last)."""


class BodyLimit:
    """Refuse request bodies over a limit with 413, before the route reads them; counts the
    bytes that actually arrive, so a missing or false Content-Length does not get around it."""

    def __init__(self, app: ASGIApp, limit: int, quoted: int | None = None):
        """limit: bytes accepted (room for a form's framing included); quoted: the limit the
        message names (the solution's, the one a user can act on)."""
        self.app, self.limit, self.quoted = app, limit, quoted or limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise TooLarge(f"the request body is larger than {self.limit} bytes")
            return message

        try:
            await self.app(scope, counted, send)
        except TooLarge:
            await self._refuse(scope, send)

    async def _refuse(self, scope: Scope, send: Send) -> None:
        message = (
            f"the upload is larger than the limit of {self.quoted:,} bytes for a solution's sources "
            "(GPUARENA_MAX_REQUEST_BYTES)"
        )
        if is_page(scope.get("path", "")):
            response: Response = web.error_page(
                Request(scope), 413, "Too large", message + ". Go back: the browser keeps what you typed."
            )
        else:
            response = JSONResponse({"error": message}, status_code=413)
        await response({"type": "http"}, None, send)  # type: ignore[arg-type]  # a response never calls receive


def is_page(path: str) -> bool:
    """Whether a path is the web pages' (answered with pages) rather than the API's (JSON)."""
    return not (path.startswith("/api") or path == "/openapi.json")


def _validation_message(errors: list[dict]) -> str:
    """pydantic's errors in a user's words: the field, then what is wrong (its validators'
    names, such as function-after[_valid(), Solution], and "Value error, " left out)."""
    parts = []
    for error in errors[:5]:
        where = ".".join(str(x) for x in error["loc"] if x != "body" and not str(x).startswith("function-")) or "body"
        parts.append(f"{where}: {str(error['msg']).removeprefix('Value error, ')}")
    more = len(errors) - 5
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _bad_value(exc: Exception) -> str | None:
    """What is wrong with a request whose values the database or its driver refused, or None
    when exc is not such an error (then it stays a 500: a bug of ours, not bad input)."""
    if isinstance(exc, UnicodeEncodeError) and "surrogate" in exc.reason:
        return "the request has text that is not valid Unicode (a lone surrogate such as \\ud800); send UTF-8 text"
    if isinstance(exc, OverflowError):
        return f"a number in the request is out of range ({exc}); ids and counts must fit in 64 bits"
    if isinstance(exc, DataError):  # PostgreSQL: integer out of range, NUL in text, value too long, ...
        why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        return f"a value in the request cannot be stored: {why}"
    return None


def _api_docs(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc from the package's own copies of their scripts: FastAPI's
    defaults load them from a CDN, and offline those pages were blank."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html

    vendor, icon = "/static/vendor", "/static/favicon.svg"

    @app.get("/docs", include_in_schema=False)
    async def _swagger() -> Response:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            swagger_js_url=f"{vendor}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{vendor}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=icon,
        )

    @app.get("/redoc", include_in_schema=False)
    async def _redoc() -> Response:
        return get_redoc_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} API",
            redoc_js_url=f"{vendor}/redoc/redoc.standalone.js",
            redoc_favicon_url=icon,
            with_google_fonts=False,
        )


def create_app(settings: Settings, db: Database, lifespan: Any = None) -> FastAPI:
    app = FastAPI(
        title="gpuarena",
        version=__version__,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        description="GPU kernel contests: problems, submissions, runners and per-device leaderboards. "
        "Send tokens as `Authorization: Bearer <token>`.",
    )
    app.state.settings, app.state.db = settings, db
    app.state.streams = live.Streams(
        db, settings.stream_poll_s, settings.streams_per_client, settings.streams_total
    )  # one poller for every live event stream (live.py)
    redact.remember_service(settings.home, settings.database_url)  # never shown in a log or reason
    app.include_router(routes.router)
    app.include_router(runner_routes.router)
    app.include_router(bounty_routes.router)
    app.include_router(contest_routes.router)
    app.include_router(sample_routes.router)
    # inside the session and security-header middleware web.mount adds (added later, so outer):
    # a refused upload's page knows who is signed in and carries the same headers
    app.add_middleware(BodyLimit, limit=settings.max_request_bytes + 64_000, quoted=settings.max_request_bytes)
    web.mount(app, settings)  # the pages, /static, the session cookie
    _api_docs(app)

    @app.exception_handler(GpuarenaError)
    async def _known(request: Request, exc: GpuarenaError) -> Response:
        status = next(code for kind, code in STATUS if isinstance(exc, kind))
        retry_after = getattr(exc, "retry_after", None)  # RateLimited, Unavailable
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
        if status == 401:
            headers = {"WWW-Authenticate": "Bearer"}
        if is_page(request.url.path):
            return web.error_page(request, status, "Not done", str(exc), headers=headers)
        return JSONResponse({"error": str(exc)}, status_code=status, headers=headers)

    @app.exception_handler(RequestValidationError)
    @app.exception_handler(pydantic.ValidationError)
    async def _invalid(request: Request, exc: RequestValidationError | pydantic.ValidationError) -> Response:
        detail = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")} for e in exc.errors()
        ]
        if is_page(request.url.path):
            if any(d["loc"][:1] == ["path"] for d in detail):  # /submissions/abc: no such page
                return web.not_found(request)
            return web.error_page(request, 400, "Not done", _validation_message(detail))
        return JSONResponse({"error": _validation_message(detail), "detail": detail}, status_code=422)

    @app.exception_handler(UnicodeEncodeError)
    @app.exception_handler(OverflowError)
    @app.exception_handler(DataError)
    async def _refused_value(request: Request, exc: Exception) -> Response:
        message = _bad_value(exc)
        if message is None:
            raise exc
        if is_page(request.url.path):
            if isinstance(exc, (OverflowError, DataError)) and request.method == "GET":
                return web.not_found(request)  # /submissions/99999999999999999999: no such page
            return web.error_page(request, 400, "Not done", message)
        return JSONResponse({"error": message}, status_code=400)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Response:
        """The API answers {"error": ...} like its other errors (an unparsable body, an unknown path)."""
        if is_page(request.url.path):
            if (exc.status_code, str(exc.detail)) == (404, "Not Found"):
                return web.not_found(request)
            return await http_exception_handler(request, exc)
        message = str(exc.detail)
        if (exc.status_code, message) == (404, "Not Found"):  # no route matched
            message = f"no such API endpoint: {request.method} {request.url.path} (see /docs)"
        elif (exc.status_code, message) == (400, "There was an error parsing the body"):
            message = (
                "the request body could not be read: it must be JSON in UTF-8, nested at most a few hundred "
                "levels deep (or a form, for the upload endpoint)"
            )
        elif (exc.status_code, message) == (405, "Method Not Allowed"):
            message = f"{request.method} is not allowed on {request.url.path} (see /docs)"
        return JSONResponse({"error": message}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    return app
