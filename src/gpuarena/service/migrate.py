"""Schema migrations with Alembic, run from the package (no alembic.ini needed)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.exc import ArgumentError, OperationalError

from gpuarena.errors import GpuarenaError
from gpuarena.service.db import ensure_sqlite_folder, normalise_url, shown_url

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["url"] = normalise_url(url)
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Bring the database at url up to the newest schema (safe to run on every start)."""
    try:
        ensure_sqlite_folder(normalise_url(url))
        command.upgrade(alembic_config(url), revision)
    except (OperationalError, OSError, ArgumentError) as exc:
        raise GpuarenaError(
            f"cannot open the database {shown_url(url)!r}: {getattr(exc, 'orig', None) or exc}"
        ) from None


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine

    engine = create_engine(normalise_url(url))
    try:
        with engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
