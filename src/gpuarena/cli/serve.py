"""`gpuarena serve`: migrate, load the problems, start the embedded runner, serve HTTP. A face over
the two other faces: the service (service/) and a runner (runner/), composed here so neither imports
the other."""

from __future__ import annotations

import logging
import math
import os
import socket
import stat
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn
from sqlalchemy import select, update
from sqlalchemy.engine import make_url

from gpuarena.errors import GpuarenaError
from gpuarena.service.app import create_app
from gpuarena.service.auth import add_user, issue_token
from gpuarena.service.catalog import sync_problems
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.migrate import upgrade
from gpuarena.service.tables import Token, User, utcnow

if TYPE_CHECKING:
    from fastapi import FastAPI

    from gpuarena.runner.agent import Runner, RunnerConfig

log = logging.getLogger("gpuarena.service")
EMBEDDED_RUNNER = "embedded-runner"


def protect_data(settings: Settings) -> None:
    """The data folder and the SQLite database readable by the service's account only.

    They hold the database (every solution's code, every job's seed), the admin token file
    scripts/serve.sh writes, the web session key and the embedded runner's work folder. The
    worker's sandbox does not show them to a solution, but a deployment may widen its view
    (a PYTHONPATH or GPUARENA_SANDBOX_SHARE that includes the folder); a worker that runs
    under its own user still cannot read them then. The folder is gpuarena's own (GPUARENA_HOME):
    it is made, or tightened to, mode 0700."""
    home = Path(settings.home)
    home.mkdir(parents=True, mode=0o700, exist_ok=True)
    mode = stat.S_IMODE(home.stat().st_mode)
    if mode & 0o077:
        os.chmod(home, 0o700)
        log.info("%s: mode %o -> 700 (the database and tokens in it are the service's alone)", home, mode)
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        for suffix in ("", "-wal", "-shm"):  # SQLite makes -wal and -shm with the database's mode
            path = url.database + suffix
            if os.path.isfile(path) and stat.S_IMODE(os.stat(path).st_mode) & 0o077:
                os.chmod(path, 0o600)


def prepare(settings: Settings) -> Database:
    """Everything but the HTTP server: data private, schema up to date, problems synced."""
    protect_data(settings)
    upgrade(settings.database_url)
    protect_data(settings)  # the database file the migration may just have made
    db = Database(settings.database_url)
    synced = sync_problems(db, settings.all_problem_roots())
    log.info("%d problems loaded", len(synced))
    return db


def embedded_runner_token(db: Database, label: str = "embedded") -> str:
    """A fresh token for this server's own runner; earlier ones with the same label (this
    server's address) are revoked, not those of other servers over the same database."""
    with db.write() as session:
        user = session.scalar(select(User).where(User.name == EMBEDDED_RUNNER)) or add_user(
            session, EMBEDDED_RUNNER, "runner"
        )
        session.execute(
            update(Token)
            .where(Token.user_id == user.id, Token.name == label, Token.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        _, plain = issue_token(session, user, label)
        return plain


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything else is done: a second `serve` on a taken
    port used to start its embedded runner first, revoking the running server's runner token
    (every submission then stayed QUEUED), and only then fail to bind."""
    family, kind, proto, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: no wait after a restart
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise GpuarenaError(
            f"cannot listen on {host}:{port} ({exc.strerror}): is another gpuarena server running there? "
            "Stop it, or pick another port (--port, GPUARENA_PORT); nothing was changed"
        ) from None
    return sock


BUDGET_ENV = "GPUARENA_RUNNER_BUDGET"
DEFAULT_BUDGET_S = 2.0


BAD_BUDGET = "give the timing budget per workload in seconds, above 0"


def budget_ok(value: float) -> bool:
    """A timing budget a runner can keep: finite and above 0 (`runner --budget` and serve's runner)."""
    return math.isfinite(value) and value > 0


def runner_budget() -> float:
    """GPUARENA_RUNNER_BUDGET: the embedded runner's timing budget per workload, in seconds, as
    `gpuarena runner --budget` reads it (default 2). Read before the server starts: a bad value
    stops it with nothing changed."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return DEFAULT_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not budget_ok(value):
        raise GpuarenaError(f"{BUDGET_ENV}={raw!r}: {BAD_BUDGET}")
    return value


def embedded_config(settings: Settings, name: str, gpus: bool, budget_s: float) -> RunnerConfig:
    """The embedded runner's configuration: this machine's devices (the GPUs unless `gpus` is
    False), its work folder under the server's home, the environment's self-test choice."""
    from gpuarena.host_devices import detect
    from gpuarena.runner.agent import RunnerConfig
    from gpuarena.runner.devices import advertise
    from gpuarena.runner.self_tests import wanted as self_tests_wanted

    return RunnerConfig(
        name=name,
        slots=advertise(detect(gpus=gpus)),
        work_dir=settings.home / "runner",
        self_test=self_tests_wanted(),
        budget_s=budget_s,
    )


def serve(settings: Settings, host: str, port: int, with_runner: bool, runner_gpus: bool = True) -> None:
    budget_s = runner_budget() if with_runner else DEFAULT_BUDGET_S
    sock = listening_socket(host, port)
    db = prepare(settings)
    embedded: list[tuple[Runner, threading.Thread]] = []  # the embedded runner and its thread, once started

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if with_runner:
            from gpuarena.client import Client
            from gpuarena.runner.agent import Runner

            local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
            client = Client(f"http://{local}:{port}", embedded_runner_token(db, f"embedded@{local}:{port}"[:64]))
            runner = Runner(client, embedded_config(settings, f"embedded@{local}:{port}", runner_gpus, budget_s))
            thread = threading.Thread(target=runner.run, name="embedded-runner", daemon=True)
            thread.start()
            embedded.append((runner, thread))
            log.info("embedded runner on %s", ", ".join(f"{s.device} ({s.kind})" for s in runner.config.slots))
        yield
        for started, started_thread in embedded:
            started.stop()
            started_thread.join(timeout=30)
        db.dispose()

    app = create_app(settings, db, lifespan)
    logging.getLogger("uvicorn.access").addFilter(QuietPolling())
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=5))
    exit_server = server.handle_exit

    def handle_exit(sig: int, frame: FrameType | None) -> None:
        # the embedded runner stops claiming first: no "claim failed" from a server going away
        for started, _ in embedded:
            started.stopping.set()
        exit_server(sig, frame)

    server.handle_exit = handle_exit  # type: ignore[method-assign]  # uvicorn's own hook, wrapped
    server.run(sockets=[sock])


class QuietPolling(logging.Filter):
    """Leaves runners' idle polling out of the access log (a claim that found nothing, a
    heartbeat): on a quiet server it was half the log. Claims that take a job, and errors, stay."""

    QUIET = {("/api/runner/claim", 204), ("/api/runner/heartbeat", 200)}

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 5:
            return (str(args[2]).split("?")[0], args[4]) not in self.QUIET
        return True
