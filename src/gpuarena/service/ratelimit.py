"""Per-user rate limits, counted in the database so they hold across threads and servers."""

from __future__ import annotations

import time

from sqlalchemy import bindparam, case, update
from sqlalchemy.orm import Session

from gpuarena.errors import GpuarenaError
from gpuarena.service.db import dialect_insert
from gpuarena.service.tables import RateCounter


class RateLimited(GpuarenaError):
    def __init__(self, action: str, limit: int, window_s: int, retry_after: int, message: str = ""):
        self.retry_after = retry_after
        super().__init__(
            message or f"rate limit: at most {limit} {action} per {window_s} s per user; retry in {retry_after} s"
        )


_TAKE = (
    update(RateCounter)
    .where(
        RateCounter.user_id == bindparam("user"),
        RateCounter.action == bindparam("act"),
        (RateCounter.window != bindparam("win")) | (RateCounter.count < bindparam("lim")),
    )
    .values(
        count=case((RateCounter.window == bindparam("win"), RateCounter.count + 1), else_=1), window=bindparam("win")
    )
)
"""Count one action if the window's count is under the limit (or the window has moved on); built once."""


def take(session: Session, user_id: int, action: str, limit: int, window_s: int = 60) -> None:
    """Count one action for user_id in the current window, or raise RateLimited.

    One conditional UPDATE decides: it succeeds only while the window's count is under the
    limit (or the window has moved on), so two concurrent requests cannot both take the last
    slot. The user's counter row is made the first time (then the UPDATE runs once more)."""
    if limit <= 0:
        return
    now = int(time.time())
    window = now - now % window_s
    connection = session.connection()
    values = {"user": user_id, "act": action, "win": window, "lim": limit}
    if connection.execute(_TAKE, values).rowcount == 1:
        return
    connection.execute(
        dialect_insert(session, RateCounter)
        .values(user_id=user_id, action=action, window=window, count=0)
        .on_conflict_do_nothing()
    )
    if connection.execute(_TAKE, values).rowcount != 1:
        raise RateLimited(action, limit, window_s, retry_after=window + window_s - now)
