"""Engines and transactions for SQLite (the embedded default) and PostgreSQL.

SQLite allows one writer at a time. A transaction that reads and then writes must take the
write lock when it begins (BEGIN IMMEDIATE), or a concurrent commit makes it fail instead of
wait; so writes go through `Database.write()` and reads through `Database.read()`, which on
SQLite use two engines over the same file. On PostgreSQL both are one engine, and the queue
takes row locks (SELECT ... FOR UPDATE SKIP LOCKED).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import ConnectionPoolEntry

from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    import sqlite3

    from sqlalchemy.dialects import postgresql, sqlite


def normalise_url(url: str) -> str:
    """Accept the URLs people type (postgresql://, postgres://) and use the psycopg 3 driver."""
    for prefix in ("postgres://", "postgresql://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def shown_url(url: str) -> str:
    """A database URL for messages and logs: its password masked (a container's logs are
    collected, and a PostgreSQL URL carries one)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: show only its scheme
        return url.split("://", 1)[0] + "://..." if "://" in url else "<database>"


def _sqlite_engine(url: str, immediate: bool) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy, not the driver, begins transactions
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def ensure_sqlite_folder(url: str) -> None:
    """Make a SQLite database's folder (mode 0700, where gpuarena makes it) and an empty file
    for it (mode 0600), before SQLite opens it: the database holds every solution's code,
    every job's seed and the token hashes, so it is never world-readable, not even between
    `gpuarena db upgrade` and the first `serve` (SQLite makes -wal and -shm with its mode)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database and parsed.database != ":memory:":
        path = Path(parsed.database)
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:
            pass  # an existing database keeps its mode (`serve` tightens its own)


class Database:
    """The service's database: `write()` and `read()` give sessions in a transaction."""

    def __init__(self, url: str):
        self.url = normalise_url(url)
        try:
            parsed = make_url(self.url)
        except Exception:
            raise GpuarenaError(
                f"--database {url!r} is not a database URL "
                "(use sqlite:///path/to/file.db or postgresql://user@host/dbname)"
            ) from None
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            ensure_sqlite_folder(self.url)
            self.write_engine = _sqlite_engine(self.url, immediate=True)
            self.read_engine = _sqlite_engine(self.url, immediate=False)
        elif self.dialect == "postgresql":
            self.write_engine = self.read_engine = create_engine(
                self.url, pool_size=10, max_overflow=20, pool_pre_ping=True
            )
        else:
            raise GpuarenaError(f"--database {url!r}: only sqlite and postgresql are supported")
        self._write_lock = threading.RLock() if self.dialect == "sqlite" else None
        self._writer = sessionmaker(self.write_engine, expire_on_commit=False)
        self._reader = sessionmaker(self.read_engine, expire_on_commit=False)

    @property
    def is_postgres(self) -> bool:
        return self.dialect == "postgresql"

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on any error."""
        if self._write_lock is None:
            with self._writer.begin() as session:
                yield session
            return
        # SQLite: one writer at a time. Waiting here, the next writer starts the moment the last
        # one commits; waiting in SQLite's busy handler, it sleeps in steps of up to 100 ms
        # (busy_timeout still covers writers in other processes).
        with self._write_lock, self._writer.begin() as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._reader() as session:
            yield session

    def dispose(self) -> None:
        self.write_engine.dispose()
        if self.read_engine is not self.write_engine:
            self.read_engine.dispose()


def dialect_insert(session: Session, table: type) -> postgresql.Insert | sqlite.Insert:
    """An INSERT that supports ON CONFLICT clauses on both SQLite and PostgreSQL."""
    from sqlalchemy.dialects import postgresql, sqlite

    return (postgresql if session.get_bind().dialect.name == "postgresql" else sqlite).insert(table)
