"""The schema's root: the one declarative Base (so one MetaData, which Alembic reads through
tables.py) and `utcnow`, the naive-UTC clock the tables' defaults use.

It sits below tables.py and the feature tables (contest_tables.py, bounty_tables.py,
sample_tables.py), so that tables.py can re-export those without an import circle.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.orm import DeclarativeBase


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}
