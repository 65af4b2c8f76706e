"""JSON request bodies parsed and validated in a worker thread, not on the event loop.

FastAPI reads a route's JSON body with json.loads and validates it with pydantic on the event
loop: a body near the size limit (GPUARENA_MAX_REQUEST_BYTES, about 2 MB of sources) held up
every other request, event streams included, for as long as that took. The API's routers use
OffLoopRoute instead. It reads the body's bytes on the loop and hands them on unparsed; the
route's dependencies (the token, the role) are checked first as before, so a caller refused
there never has a body validated; then the body is parsed and validated in a worker thread (a
sync endpoint's own, or one of the pool for an async endpoint) with FastAPI's own code, so the
answers, 422s included, and the OpenAPI schema are FastAPI's."""

from __future__ import annotations

import copy
import email.message
import functools
import inspect
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi import routing as fastapi_routing
from fastapi._compat import ModelField
from fastapi.concurrency import run_in_threadpool
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_body_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.params import Form
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException


def _is_json(request: Request) -> bool:
    """Whether FastAPI would read this body as JSON (its own test: an application/json or
    application/*+json content type)."""
    value = request.headers.get("content-type")
    if not value:
        return False
    message = email.message.Message()
    message["content-type"] = value
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


def _sub_bodies(dependant: Dependant) -> bool:
    """Whether a dependency (not the route itself) takes a body parameter."""
    return any(sub.body_params or _sub_bodies(sub) for sub in dependant.dependencies)


def _run_sync(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never awaits (request_body_to_args on a JSON body) to its end."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("request_body_to_args awaited on a JSON body")


class _Raw:
    """A JSON body as it came, passed through FastAPI's body handling untouched, to be parsed
    and validated off the loop just before the endpoint runs."""

    __slots__ = ("data",)

    def __init__(self, data: bytes):
        self.data = data


class _RawField(ModelField):
    """A body parameter that lets a _Raw body through as it is (anything else as FastAPI does)."""

    def validate(
        self,
        value: Any,
        values: dict[str, Any] = {},  # noqa: B006  # FastAPI's signature
        *,
        loc: tuple[int | str, ...] = (),
    ) -> tuple[Any, list[dict[str, Any]]]:
        if isinstance(value, _Raw):
            return value, []
        return super().validate(value, values, loc=loc)


def _raw_field(field: ModelField) -> ModelField:
    if isinstance(field, _RawField):
        return field
    twin = copy.copy(field)
    twin.__class__ = _RawField
    return twin


def _parse(field: ModelField, data: bytes) -> Any:
    """The body's value, or the error FastAPI answers for it (422, or 400 when unreadable)."""
    try:
        body = json.loads(data)  # as starlette's Request.json
    except json.JSONDecodeError as exc:  # as FastAPI answers it
        raise RequestValidationError(
            [
                {
                    "type": "json_invalid",
                    "loc": ("body", exc.pos),
                    "msg": "JSON decode error",
                    "input": {},
                    "ctx": {"error": exc.msg},
                }
            ],
            body=exc.doc,
        ) from exc
    except Exception as exc:  # nested too deep, not UTF-8: as FastAPI answers it
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc
    values, errors = _run_sync(request_body_to_args([field], body, False))
    if errors:
        raise RequestValidationError(errors, body=body)
    return values[field.name]


class OffLoopRoute(APIRoute):
    """An APIRoute whose JSON body is parsed and validated in a worker thread, after the
    route's dependencies."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        # the route as included in the app (FastAPI builds its dependant again per inclusion)
        context = getattr(fastapi_routing, "_effective_route_context_var", None)
        effective = context.get() if context is not None else None
        route = effective if effective is not None and effective.original_route is self else self
        dependant = route.dependant
        if (
            dependant is None
            or dependant.call is None
            or route.body_field is None
            or len(dependant.body_params) != 1
            or route._embed_body_fields
            or isinstance(route.body_field.field_info, Form)
            or _sub_bodies(dependant)
        ):
            return super().get_route_handler()
        # the field solve_dependencies checks the body with lets a _Raw body through; route.body_field
        # (the OpenAPI schema's) is left as it is
        field = dependant.body_params[0] = _raw_field(dependant.body_params[0])
        name, call = field.name, dependant.call
        if inspect.iscoroutinefunction(call):

            @functools.wraps(call)
            async def parsed_async(**values: Any) -> Any:
                if isinstance(values.get(name), _Raw):
                    values[name] = await run_in_threadpool(_parse, field, values[name].data)
                return await call(**values)

            dependant.call = parsed_async
        else:

            @functools.wraps(call)
            def parsed(**values: Any) -> Any:  # FastAPI runs a sync endpoint in a worker thread
                if isinstance(values.get(name), _Raw):
                    values[name] = _parse(field, values[name].data)
                return call(**values)

            dependant.call = parsed
        handler = super().get_route_handler()

        async def off_loop(request: Request) -> Response:
            if request.method not in ("GET", "HEAD") and _is_json(request):
                data = await request.body()
                if data:
                    request._json = _Raw(data)  # what FastAPI's request.json() gives: not parsed here
            return await handler(request)

        return off_loop
