"""Terse builders for contest tests: entries and contests with defaults, hours from the start."""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

from gpuarena.contests.model import Contest, Entry, Standings

T0 = dt.datetime(2026, 12, 1, 8, 0, tzinfo=dt.UTC)
"""The test contests start here and last 48 hours."""
_ids = itertools.count(1)


def at(hours: float) -> dt.datetime:
    return T0 + dt.timedelta(hours=hours)


def entry(contestant: str, problem: str = "p1", score: float | None = None, hours: float = 1.0, **fields: Any) -> Entry:
    """A ranked entry on an H100 at T0 + hours; PASSED when it has a score, else WRONG_VALUES."""
    values: dict[str, Any] = dict(
        submission_id=next(_ids),
        contestant=contestant,
        problem=problem,
        level=1,
        device_kind="H100",
        status="PASSED" if score is not None else "WRONG_VALUES",
        mode="ranked",
        score=score,
        submitted_at=at(hours),
    )
    values.update(fields)
    return Entry(**values)


def contest(rule: dict[str, Any], problems: list[str], **fields: Any) -> Contest:
    values: dict[str, Any] = dict(
        slug="test-contest",
        title="Test contest",
        start=T0,
        end=at(48),
        problems=problems,
        device_kinds=["H100"],
        rule=rule,
    )
    values.update(fields)
    return Contest(**values)


def table(standings: Standings) -> list[tuple[int, str, float, str | None]]:
    """(rank, contestant, total, tie_break) per row: what the worked examples write down."""
    return [(r.rank, r.contestant, r.total, r.tie_break) for r in standings.rows]
