"""Live submission events (issue 46, item 7): one poller reads the database once per round for
every open stream, however many there are; streams beyond the caps are refused at once (429
per client, 503 in all); events still arrive, over a real HTTP server."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx
import pytest
from sqlalchemy import event
from tests.service.conftest import submission_body

from gpuarena.client import Client, parse_events
from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service.deps import Caller
from gpuarena.service.live import Streams
from gpuarena.service.tables import User


@pytest.fixture
def settings(settings):
    """Small caps, and a quick poller, for these tests."""
    return settings.model_copy(update={"streams_per_client": 2, "streams_total": 3, "stream_poll_s": 0.1})


def _evaluation() -> dict:
    return Evaluation(
        status=Status.PASSED, problem="axpy_dest", solution_hash="0" * 64, device="cpu", mode="ranked", score=1.5
    ).model_dump(mode="json")


class Queue:
    """A runner and helpers to claim and finish jobs through the API."""

    def __init__(self, api):
        self.api = api
        self.runner_headers, self.runner_id = api.runner()

    def submit(self, who: dict) -> int:
        made = self.api.http.post("/api/submissions", json=submission_body(), headers=who)
        assert made.status_code == 201, made.text
        return made.json()["id"]

    def claim(self) -> dict:
        job = self.api.http.post(
            "/api/runner/claim",
            json={"runner_id": self.runner_id, "device_kinds": ["cpu"], "wait_s": 0},
            headers=self.runner_headers,
        )
        assert job.status_code == 200, job.text
        return job.json()

    def finish(self, job: dict) -> None:
        posted = self.api.http.post(
            f"/api/runner/jobs/{job['job_id']}/result",
            headers=self.runner_headers,
            json={"lease_token": job["lease_token"], "evaluation": _evaluation()},
        )
        assert posted.status_code == 200, posted.text


@contextlib.contextmanager
def counted(db):
    """The queries the database is sent meanwhile (both engines, for SQLite; not BEGIN)."""
    statements: list[str] = []

    def count(conn, cursor, statement, *args) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH", "INSERT", "UPDATE", "DELETE")):
            statements.append(statement)

    engines = {db.read_engine, db.write_engine}
    for engine in engines:
        event.listen(engine, "before_cursor_execute", count)
    try:
        yield statements
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", count)


def test_many_listeners_cost_the_database_one_read_per_round(api) -> None:
    q = Queue(api)
    alice, bob = api.user("alice"), api.user("bob")
    watched = [q.submit(alice), q.submit(bob), q.submit(alice)]
    with api.db.read() as session:
        alice_id = session.query(User.id).filter(User.name == "alice").scalar()
    viewers = [None, Caller(user_id=alice_id, name="alice", role="participant", token_id=0, device_kinds=None)]

    async def scenario() -> None:
        streams = Streams(api.db, interval_s=3600)  # the test runs each round itself
        first = streams.snapshots(watched)
        assert first[watched[0]] == ("QUEUED", 1) and first[watched[2]] == ("QUEUED", 3)
        one = streams.subscribe(watched[0], None, first[watched[0]])
        with counted(api.db) as alone:
            assert await streams.poll() == 0  # nothing changed: nobody is told
        listeners = [one] + [streams.subscribe(sid, viewers[i % 2], first[sid]) for i, sid in enumerate(watched * 40)]
        assert len(listeners) == 121
        with counted(api.db) as crowd:
            assert await streams.poll() == 0
        # one query for every watched submission's status, three for the queue's order: not per stream
        assert len(alone) == len(crowd) == 4, (alone, crowd)

        job = await asyncio.to_thread(q.claim)  # the first job runs; the others move up the queue
        assert job["submission_id"] == watched[0]
        with counted(api.db) as changed:
            assert await streams.poll() == len(listeners)
        # the round, then each submission's detail once per kind of viewer (anonymous, alice): 3 x 2
        details = len(changed) - 4
        assert 0 < details <= 6 * 12, changed
        news = {sid: [] for sid in watched}
        for listener in listeners:
            got = listener.outbox.get_nowait()
            assert got.startswith("event: status\n")
            news[listener.submission_id].append(got)
            assert listener.outbox.empty()
        assert all('"status":"RUNNING"' in e for e in news[watched[0]])
        assert all('"queue_position":1' in e for e in news[watched[1]])
        assert all('"queue_position":2' in e for e in news[watched[2]])

        await asyncio.to_thread(q.finish, job)
        assert await streams.poll() == 41  # the first submission's listeners: PASSED, then done
        for listener in listeners:
            if listener.submission_id == watched[0]:
                assert '"status":"PASSED"' in listener.outbox.get_nowait()
                assert listener.outbox.get_nowait().startswith("event: done")
            assert listener.outbox.empty()

    _run(scenario())


def _run(coroutine) -> None:
    """asyncio.run in a thread of its own (another test's client may have left a loop running in this one)."""
    failed: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coroutine)
        except BaseException as exc:  # re-raised below, in the test's thread
            failed.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if failed:
        raise failed[0]


def _open(url: str, headers: dict | None = None) -> tuple[httpx.Client, httpx.Response]:
    client = httpx.Client(timeout=httpx.Timeout(30.0))
    response = client.send(client.build_request("GET", url, headers=headers or {}), stream=True)
    return client, response


def test_streams_beyond_the_caps_are_refused_and_events_still_arrive(api, live) -> None:
    q = Queue(api)
    alice, bob = api.user("alice"), api.user("bob")
    sid = q.submit(alice)
    url = f"{live}/api/submissions/{sid}/events"
    opened = []
    try:
        for _ in range(2):  # the per-client cap: two from this address
            opened.append(_open(url))
            assert opened[-1][1].status_code == 200
        client, refused = _open(url)
        refused.read()
        client.close()
        assert refused.status_code == 429 and refused.headers["retry-after"]
        assert "too many live event streams open from you (2; the limit is 2" in refused.json()["error"]

        opened.append(_open(url, alice))  # a signed-in user is a client of their own
        assert opened[-1][1].status_code == 200
        client, full = _open(url, bob)  # but the server holds 3 at most
        full.read()
        client.close()
        assert full.status_code == 503 and full.headers["retry-after"]
        assert "the server has 3 live event streams open" in full.json()["error"]

        client, response = opened.pop(0)  # one goes: its place is free again
        response.close()
        client.close()
        deadline = time.monotonic() + 30
        while True:
            client, again = _open(url, bob)
            if again.status_code == 200:
                opened.append((client, again))
                break
            again.read()
            client.close()
            assert again.status_code == 503 and time.monotonic() < deadline
            time.sleep(0.2)

        polled: list[dict] = []  # the server is full: the CLI's client polls instead of failing
        watcher = threading.Thread(target=lambda: polled.extend(Client(live).watch(sid)), daemon=True)
        watcher.start()
        q.finish(q.claim())  # every open stream hears it: RUNNING (perhaps), PASSED, done
        watcher.join(timeout=60)
        assert not watcher.is_alive() and polled[-1]["status"] == "PASSED" and polled[-1]["done"]
        for _, response in opened:
            events = list(parse_events(response.iter_lines()))
            assert events[0][0] == "status" and events[0][1]["status"] == "QUEUED"
            assert events[-2][0] == "status" and events[-2][1]["status"] == "PASSED"
            assert events[-1][0] == "done"
    finally:
        for client, response in opened:
            response.close()
            client.close()
