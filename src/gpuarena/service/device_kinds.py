"""Device kinds as runners bring them: which are online now, and what to tell an organiser who
makes a contest or a speed bounty for a kind that no runner serves yet (allowed: the runners of
an event often connect after it is announced)."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuarena.service.tables import DeviceKind, Runner, utcnow

RUNNER_ONLINE = dt.timedelta(minutes=2)
"""A runner heard from within this long counts as online."""


def online_kinds(session: Session) -> dict[str, int]:
    """Runners online per device kind."""
    online: dict[str, int] = {}
    for kinds in session.scalars(select(Runner.device_kinds).where(Runner.last_seen_at > utcnow() - RUNNER_ONLINE)):
        for kind in kinds or []:
            online[kind] = online.get(kind, 0) + 1
    return online


def runner_warnings(session: Session, kinds: list[str]) -> list[str]:
    """One sentence per kind no runner serves now: never seen, or seen but offline."""
    if not kinds:
        return []
    seen = set(session.scalars(select(DeviceKind.name).where(DeviceKind.name.in_(kinds))))
    online = online_kinds(session)
    warnings = []
    for kind in dict.fromkeys(kinds):
        if kind not in seen:
            warnings.append(
                f"no runner of device kind {kind!r} has been seen yet: submissions for it are accepted once "
                f"a runner with that device connects (`gpuarena runner`)"
            )
        elif not online.get(kind):
            warnings.append(f"no runner of device kind {kind!r} is online now: its jobs wait until one connects")
    return warnings
