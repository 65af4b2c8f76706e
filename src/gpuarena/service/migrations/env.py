"""Alembic environment: the URL comes from the caller (gpuarena db upgrade, gpuarena serve)."""

from alembic import context
from sqlalchemy import create_engine, text

from gpuarena.service.tables import Base

ADVISORY_LOCK = 7_420_261_122
"""Several API servers may start at once over one PostgreSQL: one migrates, the others wait."""


def run() -> None:
    url = context.config.attributes["url"]
    engine = create_engine(url)
    with engine.connect() as connection:
        postgres = connection.dialect.name == "postgresql"
        if postgres:
            connection.execute(text(f"SELECT pg_advisory_lock({ADVISORY_LOCK})"))
            connection.commit()
        try:
            context.configure(
                connection=connection, target_metadata=Base.metadata, render_as_batch=not postgres, compare_type=True
            )
            with context.begin_transaction():
                context.run_migrations()
            connection.commit()
        finally:
            if postgres:
                connection.execute(text(f"SELECT pg_advisory_unlock({ADVISORY_LOCK})"))
                connection.commit()
    engine.dispose()


run()
