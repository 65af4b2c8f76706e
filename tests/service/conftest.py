"""Service fixtures: a fresh database per test, on SQLite and (when one is running)
PostgreSQL, copied from a migrated template (tests/databases.py)."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from fastapi.testclient import TestClient
from tests.databases import Templates, postgres_database

from gpuarena.service.app import create_app
from gpuarena.service.auth import add_user, issue_token
from gpuarena.service.catalog import sync_problems
from gpuarena.service.config import Settings
from gpuarena.service.db import Database

ROOT = Path(__file__).resolve().parents[2]
FIXTURE_PROBLEMS = ROOT / "tests" / "fixtures" / "problems"


def _postgres_database() -> Iterator[str]:
    """An empty PostgreSQL database for a server that migrates it itself (next() it; close() drops it)."""
    with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path, database_templates: Templates) -> Iterator[str]:
    """A migrated database of the test's own, on SQLite and on PostgreSQL (tests/databases.py)."""
    if request.param == "sqlite":
        yield database_templates.sqlite(tmp_path / "gpuarena.db")
    else:
        with database_templates.postgres() as url:
            yield url


@pytest.fixture
def settings(database_url, tmp_path) -> Settings:
    return Settings(
        home=tmp_path / "home",
        database_url=database_url,
        problem_roots=[FIXTURE_PROBLEMS],
        bundled_problems=False,
        submit_limit_per_minute=1000,
        max_in_flight=1000,
        lease_s=60,
    )


@pytest.fixture
def db(settings) -> Iterator[Database]:
    database = Database(settings.database_url)
    sync_problems(database, settings.all_problem_roots())
    yield database
    database.dispose()


class Api:
    """A TestClient over the real app and database, plus helpers to make accounts."""

    def __init__(self, settings: Settings, db: Database):
        self.settings, self.db = settings, db
        self.http = TestClient(create_app(settings, db), raise_server_exceptions=False)

    def user(self, name: str, role: str = "participant", device_kinds: list[str] | None = None) -> dict[str, str]:
        with self.db.write() as session:
            user = add_user(session, name, role)
            _, plain = issue_token(session, user, "test", device_kinds=device_kinds)
        return {"Authorization": f"Bearer {plain}"}

    def runner(self, name: str = "r1", kinds: tuple[str, ...] = ("cpu",), role: str = "runner") -> tuple[dict, int]:
        headers = self.user(name + "-account", role)
        devices = [{"device": "cpu" if k == "cpu" else f"cuda:{i}", "kind": k} for i, k in enumerate(kinds)]
        reply = self.http.post("/api/runner/hello", json={"name": name, "devices": devices}, headers=headers)
        assert reply.status_code == 200, reply.text
        return headers, reply.json()["runner_id"]


@pytest.fixture
def api(settings, db) -> Api:
    return Api(settings, db)


@pytest.fixture
def live(api) -> Iterator[str]:
    """The test's app on a free port, served by uvicorn in a thread; its URL (a real HTTP
    server over the test's database, for clients that stream or run as a user would)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(api.http.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=30)


GOOD = "import torch\n\n\ndef solve(a, x, b, y):\n    torch.addcmul(b, a, x, out=y)\n"


def submission_body(
    problem: str = "axpy_dest", device_kind: str = "cpu", mode: str = "ranked", source: str = GOOD
) -> dict:
    return {
        "problem": problem,
        "device_kind": device_kind,
        "mode": mode,
        "solution": {
            "name": "sol",
            "manifest": {"language": "pytorch", "entry_point": "sol.py:solve"},
            "sources": {"sol.py": source},
        },
    }


@pytest.fixture
def env(tmp_path) -> dict:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    environment.update(
        GPUARENA_HOME=str(tmp_path / "home"),
        GPUARENA_CACHE=str(tmp_path / "cache"),
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PYTHONPATH=str(ROOT),
        GPUARENA_SUBMIT_LIMIT="1000",
        GPUARENA_MAX_IN_FLIGHT="1000",
        GPUARENA_RUNNER_SELF_TEST="0",  # the languages' self-tests: tests/test_language_check.py
        GPUARENA_RUNNER_BUDGET="0.1",  # the jobs' timing: enough rounds for every bound, not a ranking's
    )
    return environment


@pytest.fixture(params=["sqlite", "postgresql"])
def served(request, env):
    if request.param == "postgresql":
        databases = _postgres_database()
        env["GPUARENA_DATABASE_URL"] = next(databases)
    from tests.service.processes import Server

    server = Server(env)
    yield server, env
    server.stop()
    if request.param == "postgresql":
        databases.close()
