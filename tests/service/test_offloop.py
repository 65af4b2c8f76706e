"""Issue 46: a large JSON body is parsed and validated in a worker thread, so other requests
are answered meanwhile (service/offloop.py)."""

from __future__ import annotations

import threading

import anyio
import httpx
from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from pydantic import BaseModel, model_validator
from tests.service.conftest import submission_body

from gpuarena.service import bounty_routes, contest_routes, routes, runner_routes, sample_routes
from gpuarena.service.offloop import OffLoopRoute

entered, release = threading.Event(), threading.Event()
validated_on: list[int] = []


class Slow(BaseModel):
    text: str

    @model_validator(mode="after")
    def _hold(self) -> Slow:
        validated_on.append(threading.get_ident())
        entered.set()
        release.wait(10)  # bounded: on the loop, this is how long everything else waits
        return self


def test_a_body_being_validated_does_not_hold_up_other_requests() -> None:
    router = APIRouter(route_class=OffLoopRoute)

    @router.post("/slow")
    def slow(body: Slow) -> dict:
        return {"length": len(body.text)}

    @router.post("/slow-async")
    async def slow_async(body: Slow) -> dict:
        return {"length": len(body.text)}

    @router.get("/health")
    def health() -> dict:
        return {"ok": True}

    app = FastAPI()
    app.include_router(router)
    answers: dict[str, httpx.Response] = {}

    async def main() -> int:
        loop_thread = threading.get_ident()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:

            async def post() -> None:
                answers["slow"] = await client.post("/slow", json={"text": "x" * 1_900_000})

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(post)
                with anyio.fail_after(10):
                    while not entered.is_set():
                        await anyio.sleep(0.01)
                answers["health"] = await client.get("/health")  # while the body's validation waits
                answers["health_done_before_release"] = not release.is_set()  # type: ignore[assignment]
                release.set()
            answers["async"] = await client.post("/slow-async", json={"text": "y" * 1000})
        return loop_thread

    loop_thread = anyio.run(main)
    release.set()
    assert validated_on and validated_on[0] != loop_thread
    assert answers["health"].json() == {"ok": True} and answers["health_done_before_release"]
    assert answers["slow"].status_code == 200 and answers["slow"].json() == {"length": 1_900_000}
    assert answers["async"].json() == {"length": 1000}  # an async endpoint's body: in the pool too
    assert len(validated_on) == 2 and loop_thread not in validated_on


def test_every_api_route_with_a_json_body_validates_it_off_the_loop(api) -> None:
    for module in (routes, runner_routes, bounty_routes, contest_routes, sample_routes):
        for route in module.router.routes:
            if isinstance(route, APIRoute) and route.body_field is not None:
                assert isinstance(route, OffLoopRoute), f"{route.path}: a JSON body validated on the event loop"
    api.runner()  # makes the cpu kind known
    headers = api.user("ann")
    # FastAPI's own answers, unchanged: 422 with the field, bad JSON, 400 for an unreadable body
    bad = api.http.post("/api/submissions", json={**submission_body(), "mode": "fastest"}, headers=headers)
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["loc"][:2] == ["body", "mode"] and bad.json()["error"].startswith("mode: ")
    broken = api.http.post(
        "/api/submissions", content=b'{"mode": ', headers={**headers, "Content-Type": "application/json"}
    )
    assert broken.status_code == 422 and broken.json()["detail"][0]["type"] == "json_invalid"
    deep = api.http.post(
        "/api/submissions", content=b"[" * 100_000, headers={**headers, "Content-Type": "application/json"}
    )
    assert deep.status_code in (400, 422), deep.text
    made = api.http.post("/api/tokens", json={"name": "laptop"}, headers=headers)
    assert made.status_code == 201, made.text
    ok = api.http.post("/api/submissions", json=submission_body(mode="test"), headers=headers)
    assert ok.status_code == 201 and ok.json()["mode"] == "test", ok.text
    # the schema still shows the body models
    schema = api.http.get("/openapi.json").json()
    body = schema["paths"]["/api/submissions"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/SubmissionRequest"}
