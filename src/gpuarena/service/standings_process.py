"""Contest standings computed in a process of their own, beside each server process.

A large contest's standings take the better part of a second to bring up to date after a
change (10,000 contestants x 50 problems: 0.45 s on the 2-core VM), most of it Python holding
the interpreter lock, so every other request of the server process waited behind them:
leaderboard reads went from a p99 of 9 ms to 330 ms while a contest was busy
(bench/contest_leaderboard_reads.py). Here the work runs in one child process per server
process (a pool of one, started on first use), which keeps each contest's entries between
calls (contest_standings._Kept) exactly as the server process did; the server process only
checks who may see what and passes the finished JSON on.

GPUARENA_STANDINGS_PROCESS=0 computes in the server process instead (and so does a server
whose child cannot start: the reason is logged once).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from gpuarena.service import contest_standings
from gpuarena.service.db import Database
from gpuarena.service.tables import ContestRow

log = logging.getLogger("gpuarena.standings")
TIMEOUT_S = 300.0
"""A first read of a contest of 560,000 entries takes about 10 s on the 2-core VM."""

_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()
_off_reason: str | None = None


def _wanted() -> bool:
    return os.environ.get("GPUARENA_STANDINGS_PROCESS", "1").strip().lower() not in ("0", "off", "false", "no")


def _executor() -> ProcessPoolExecutor | None:
    global _pool, _off_reason
    with _pool_lock:
        if _pool is None and _off_reason is None:
            try:
                # spawn: a fork of a server process with threads running could inherit a held lock
                _pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=_leave_with_parent,
                    initargs=(os.getpid(),),
                )
            except (OSError, ValueError) as exc:
                _off_reason = f"standings are computed in the server process: no child process ({exc})"
                log.warning(_off_reason)
        return _pool


def _restart(broken: ProcessPoolExecutor) -> None:
    global _pool
    with _pool_lock:
        if _pool is broken:
            _pool = None
    broken.shutdown(wait=False, cancel_futures=True)


def standings_json(db: Database, contest_id: int, shown_frozen: bool) -> bytes:
    """The API's JSON of a contest's standings (public frozen, or live), from the child."""
    pool = _executor() if _wanted() else None
    if pool is not None:
        for _ in range(2):  # a child that died (killed, out of memory) is replaced once
            try:
                return pool.submit(_in_child, db.url, contest_id, shown_frozen).result(timeout=TIMEOUT_S)
            except BrokenProcessPool:
                _restart(pool)
                pool = _executor()
                if pool is None:
                    break
    with db.read() as session:
        row = session.get(ContestRow, contest_id)
        assert row is not None  # the caller found the contest
        return contest_standings.computed_json(session, row, shown_frozen)


def shutdown() -> None:
    """Stop the child (the server's shutdown; tests)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


PARENT_POLL_S = 1.0


def _leave_with_parent(parent: int) -> None:
    """In the child: exit once the server process that started it is gone. A server killed
    outright (a crash, SIGKILL at a deploy) never shuts its pool down, and its child stayed,
    reparented, for good: 5 of them, about 320 MB each, after one run of the end-to-end tests."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="gpuarena-standings-parent", daemon=True).start()


_databases: dict[str, Database] = {}
"""In the child: one Database per URL, kept between calls (its engines pool connections)."""


def _in_child(url: str, contest_id: int, shown_frozen: bool) -> bytes:
    db = _databases.get(url)
    if db is None:
        db = _databases[url] = Database(url)
    with db.read() as session:
        row = session.get(ContestRow, contest_id)
        assert row is not None  # the caller found the contest
        return contest_standings.computed_json(session, row, shown_frozen)
