"""Databases for tests, each a copy of a template migrated once per test process.

Running every Alembic migration in each test's setup cost seconds a test on a busy machine;
a copy costs milliseconds. SQLite copies a migrated file; PostgreSQL makes each database
with `CREATE DATABASE ... TEMPLATE`. Every test still gets a database of its own.

scripts/test.sh starts PostgreSQL and sets GPUARENA_TEST_POSTGRES_URL; without it the
PostgreSQL half is skipped, unless GPUARENA_REQUIRE_POSTGRES=1 (CI), where it fails."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from gpuarena.service.db import normalise_url
from gpuarena.service.migrate import upgrade

POSTGRES = os.environ.get("GPUARENA_TEST_POSTGRES_URL")


def postgres_server() -> str:
    """The test server's URL; skips the test (fails it in CI) where there is none."""
    if not POSTGRES:
        if os.environ.get("GPUARENA_REQUIRE_POSTGRES") == "1":
            pytest.fail("GPUARENA_TEST_POSTGRES_URL is not set (scripts/test.sh starts PostgreSQL and sets it)")
        pytest.skip("no PostgreSQL: run scripts/postgres.sh and set GPUARENA_TEST_POSTGRES_URL")
    return POSTGRES


def _admin(server: str, sql: str) -> None:
    admin = create_engine(normalise_url(server), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(sql))
    finally:
        admin.dispose()


@contextmanager
def postgres_database(template: str | None = None) -> Iterator[str]:
    """A new PostgreSQL database (empty, or a copy of `template`), dropped afterwards."""
    server = postgres_server()
    name = "gpuarena_test_" + secrets.token_hex(6)
    _admin(server, f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else ""))
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        _admin(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Templates:
    """Migrated databases to copy, made on first use and kept for the test process."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._sqlite: Path | None = None
        self._postgres: str | None = None

    def sqlite(self, into: Path) -> str:
        """A migrated SQLite database at `into` (a file that must not exist yet)."""
        if self._sqlite is None:
            template = self.folder / "template.sqlite"
            upgrade(f"sqlite:///{template}")
            self._sqlite = template
        shutil.copyfile(self._sqlite, into)
        return f"sqlite:///{into}"

    @contextmanager
    def postgres(self) -> Iterator[str]:
        """A migrated PostgreSQL database of the test's own, dropped afterwards."""
        server = postgres_server()
        if self._postgres is None:
            name = "gpuarena_template_" + secrets.token_hex(6)
            _admin(server, f"CREATE DATABASE {name}")
            upgrade(server.rsplit("/", 1)[0] + "/" + name)  # its engine is disposed: no session stays
            self._postgres = name
        with postgres_database(self._postgres) as url:
            yield url

    def close(self) -> None:
        if self._postgres is not None and POSTGRES:
            _admin(POSTGRES, f"DROP DATABASE IF EXISTS {self._postgres} WITH (FORCE)")
            self._postgres = None
