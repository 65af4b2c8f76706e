"""Per-problem, per-device-kind leaderboards: each user's best ranked, passing submission."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Integer, bindparam, select
from sqlalchemy.orm import Session

from gpuarena.service.db import dialect_insert
from gpuarena.service.tables import LeaderboardEntry, Submission, User

RANKED_MODE = "ranked"


def counts(submission: Submission) -> bool:
    """Only ranked runs (secret seed) that passed with a score enter a leaderboard."""
    return submission.mode == RANKED_MODE and submission.status == "PASSED" and submission.score is not None


def record_result(session: Session, submission: Submission) -> None:
    """Raise the user's entry if this submission beats it, atomically (an upsert with a
    condition), so concurrent results for one user cannot lose the better one."""
    if not counts(submission):
        return
    values = dict(
        problem_id=submission.problem_id,
        device_kind=submission.device_kind,
        user_id=submission.user_id,
        submission_id=submission.id,
        score=submission.score,
        achieved_at=submission.finished_at,
    )
    statement = dialect_insert(session, LeaderboardEntry).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=["problem_id", "device_kind", "user_id"],
        set_={k: statement.excluded[k] for k in ("submission_id", "score", "achieved_at")},
        where=LeaderboardEntry.score < statement.excluded.score,
    )
    session.execute(statement)


@dataclass
class Row:
    rank: int
    user: str
    score: float
    submission_id: int
    achieved_at: dt.datetime


_READ = (
    select(LeaderboardEntry.score, LeaderboardEntry.submission_id, LeaderboardEntry.achieved_at, User.name)
    .join(User, User.id == LeaderboardEntry.user_id)
    .where(
        LeaderboardEntry.problem_id == bindparam("problem_id"), LeaderboardEntry.device_kind == bindparam("device_kind")
    )
    .order_by(LeaderboardEntry.score.desc(), LeaderboardEntry.achieved_at)
    .limit(bindparam("limit", type_=Integer))
)
"""Built once: a leaderboard read is the hottest query, and building a statement costs more than running it."""


def read_rows(session: Session, problem_id: int, device_kind: str, limit: int = 100) -> list[tuple]:
    """(score, submission_id, achieved_at, user name) best first, as plain rows: through the
    session's connection, without the ORM's per-row bookkeeping."""
    return list(
        session.connection()
        .execute(_READ, {"problem_id": problem_id, "device_kind": device_kind, "limit": limit})
        .all()
    )


def read(session: Session, problem_id: int, device_kind: str, limit: int = 100) -> list[Row]:
    return [
        Row(rank=i + 1, user=name, score=score, submission_id=sid, achieved_at=at)
        for i, (score, sid, at, name) in enumerate(read_rows(session, problem_id, device_kind, limit))
    ]


def recompute(session: Session, problem_id: int, device_kind: str) -> list[tuple[str, float, int]]:
    """The leaderboard from the submissions themselves (for consistency checks)."""
    best: dict[str, tuple[float, int]] = {}
    query = select(Submission).where(
        Submission.problem_id == problem_id,
        Submission.device_kind == device_kind,
        Submission.mode == RANKED_MODE,
        Submission.status == "PASSED",
    )
    for s in session.scalars(query.order_by(Submission.finished_at)):
        if s.score is not None and (s.user.name not in best or s.score > best[s.user.name][0]):
            best[s.user.name] = (s.score, s.id)
    return sorted(((u, sc, sid) for u, (sc, sid) in best.items()), key=lambda r: -r[1])
