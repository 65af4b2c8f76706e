"""Live submission events (GET /api/submissions/ID/events): one poller per process for every
open stream, and a cap on how many streams are open.

Each stream used to run its own loop: the submission's detail (its queue position included, a
window query over the queue) four times a second. 120 anonymous streams were 480 such reads a
second, and the leaderboard's p99 went from 15 ms to over a second. Here one task polls once per
`interval_s` for every stream at once: one query reads the status and job of every watched
submission, and one queue order per device kind gives the queue positions of the watched queued
jobs, however many streams are open. Only when a submission's status or queue position changes is
its detail read, once per kind of viewer (anonymous, or each signed-in user), and sent to each
of its streams. Keep-alive comments cost nothing: a stream that has had no news for
KEEP_ALIVE_S writes one.

Streams are capped per client (a signed-in user, else the client's address) and in total;
beyond the caps a stream is refused at once, 429 or 503 with Retry-After, before it touches the
database (the CLI then polls the submission instead)."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select

from gpuarena.service import queue, submissions
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Unavailable
from gpuarena.service.ratelimit import RateLimited
from gpuarena.service.schemas import SubmissionDetail
from gpuarena.service.tables import Job, Submission

log = logging.getLogger("gpuarena.service")
KEEP_ALIVE_S = 15.0
"""A stream with no news writes a comment this often (proxies close silent connections)."""
DISCONNECT_CHECK_S = 1.0
"""How often a waiting stream looks whether its client went away (no database involved)."""
RETRY_AFTER_S = 30

Snapshot = tuple[str, int | None]
"""What a stream reports a change of: the status and the queue position."""


@dataclass(eq=False)
class Listener:
    """One open stream: who watches (what they may see), what it last sent, its outbox."""

    submission_id: int
    viewer: Caller | None
    last: Snapshot | None
    outbox: asyncio.Queue[str] = field(default_factory=asyncio.Queue)

    @property
    def viewer_key(self) -> int | None:
        return self.viewer.user_id if self.viewer is not None else None


class Streams:
    """The process's live streams: admission under the caps, and the one poller."""

    def __init__(self, db: Database, interval_s: float = 0.5, per_client: int = 8, total: int = 500):
        self.db, self.interval_s = db, interval_s
        self.per_client, self.total = per_client, total
        self.clients: Counter[str] = Counter()
        self.listeners: dict[int, set[Listener]] = {}
        self.polls = 0
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # admission
    @property
    def open(self) -> int:
        return sum(self.clients.values())

    def admit(self, client: str) -> Callable[[], None]:
        """Count a new stream for `client`, or refuse it; returns the call that lets it go."""
        if self.per_client and self.clients[client] >= self.per_client:
            raise RateLimited(
                "live event streams",
                self.per_client,
                0,
                RETRY_AFTER_S,
                f"too many live event streams open from you ({self.clients[client]}; the limit is "
                f"{self.per_client}, GPUARENA_STREAMS_PER_CLIENT): close one, or poll "
                "GET /api/submissions/ID instead",
            )
        if self.total and self.open >= self.total:
            raise Unavailable(
                f"the server has {self.open} live event streams open, its limit "
                f"(GPUARENA_STREAMS_TOTAL): poll GET /api/submissions/ID instead, or retry later",
                RETRY_AFTER_S,
            )
        self.clients[client] += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.clients[client] -= 1
                if self.clients[client] <= 0:
                    del self.clients[client]

        return release

    # listening
    def subscribe(self, submission_id: int, viewer: Caller | None, last: Snapshot | None) -> Listener:
        listener = Listener(submission_id, viewer, last)
        self.listeners.setdefault(submission_id, set()).add(listener)
        self._ensure_poller()
        return listener

    def unsubscribe(self, listener: Listener) -> None:
        watching = self.listeners.get(listener.submission_id)
        if watching is not None:
            watching.discard(listener)
            if not watching:
                del self.listeners[listener.submission_id]

    def _ensure_poller(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop, self._task = loop, loop.create_task(self._run())

    async def _run(self) -> None:
        while self.listeners:
            await asyncio.sleep(self.interval_s)
            try:
                await self.poll()
            except Exception as exc:  # a database hiccup: the next round tries again
                log.warning("polling the live event streams failed: %s", exc)
                await asyncio.sleep(self.interval_s)

    # polling
    def snapshots(self, ids: list[int]) -> dict[int, Snapshot]:
        """The status and queue position of each watched submission: one query for all of
        them, and one queue order (queue.queue_order: three small reads) per device kind with
        watched queued jobs, however many streams watch."""
        with self.db.read() as session:
            rows = session.execute(
                select(Submission.id, Submission.status, Job.id, Job.state, Job.device_kind)
                .outerjoin(Job, Job.submission_id == Submission.id)
                .where(Submission.id.in_(ids))
            ).all()
            queued: dict[str, set[int]] = {}
            for _, _, job_id, state, kind in rows:
                if state == "queued":
                    queued.setdefault(kind, set()).add(job_id)
            positions: dict[int, int] = {}
            for kind, watched in queued.items():
                for place, job_id in enumerate(queue.queue_order(session, [kind]), start=1):
                    if job_id in watched:
                        positions[job_id] = place
            return {sid: (status, positions.get(job_id)) for sid, status, job_id, _, _ in rows}

    async def poll(self) -> int:
        """One round for every stream: send the news to those whose submission changed.
        Returns the streams told."""
        self.polls += 1
        ids = sorted(self.listeners)
        if not ids:
            return 0
        now = await run_in_threadpool(self.snapshots, ids)
        stale = [
            listener
            for sid in ids
            for listener in list(self.listeners.get(sid, ()))
            if sid in now and listener.last != now[sid]
        ]
        details: dict[tuple[int, int | None], SubmissionDetail] = {}
        for listener in stale:  # the detail once per submission and kind of viewer
            key = (listener.submission_id, listener.viewer_key)
            if key not in details:
                details[key] = await run_in_threadpool(
                    submissions.detail, self.db, listener.submission_id, listener.viewer
                )
        for listener in stale:
            detail = details[(listener.submission_id, listener.viewer_key)]
            listener.last = now[listener.submission_id]  # as stored (a viewer may be shown it HELD)
            listener.outbox.put_nowait(status_event(detail))
            if detail.done:
                listener.outbox.put_nowait(DONE)
        return len(stale)

    async def stream(
        self,
        first: SubmissionDetail,
        viewer: Caller | None,
        release: Callable[[], None],
        disconnected: Callable[[], Awaitable[bool]],
    ) -> AsyncIterator[str]:
        """A stream's events: `first`, then each change, until done or the client goes."""
        try:
            yield status_event(first)
            if first.done:
                yield DONE
                return
            listener = self.subscribe(first.id, viewer, (first.status, first.queue_position))
            try:
                quiet = 0.0
                while True:
                    try:
                        event = await asyncio.wait_for(listener.outbox.get(), DISCONNECT_CHECK_S)
                    except TimeoutError:
                        if await disconnected():
                            return
                        quiet += DISCONNECT_CHECK_S
                        if quiet >= KEEP_ALIVE_S:
                            quiet = 0.0
                            yield ": keep-alive\n\n"
                        continue
                    quiet = 0.0
                    yield event
                    if event == DONE:
                        return
            finally:
                self.unsubscribe(listener)
        finally:
            release()


DONE = "event: done\ndata: {}\n\n"


def status_event(detail: SubmissionDetail) -> str:
    return f"event: status\ndata: {detail.model_dump_json()}\n\n"
