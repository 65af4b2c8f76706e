"""Per-problem, per-device-kind leaderboards: each user's best ranked, passing submission.

Everything a leaderboard, its history or a user's ranks show is precomputed when a result is
accepted (record_result), so that a page reads a bounded number of indexed rows whatever the
number of stored submissions (bench/page_cost.py): the best per user (LeaderboardEntry, with
the score's interval), the moments the best went up (BestPointRow), and the bests held by a
contest's freeze (HeldBest, holdback.py) until the contest ends (release_due)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Integer, bindparam, delete, func, insert, select, update
from sqlalchemy.orm import Session

from gpuarena.service import holdback
from gpuarena.service.db import Database, dialect_insert
from gpuarena.service.holdback import ANONYMOUS, Scope
from gpuarena.service.tables import (
    BestPointRow,
    ContestEntry,
    HeldBest,
    LeaderboardEntry,
    Result,
    Submission,
    User,
    utcnow,
)

RANKED_MODE = "ranked"
HISTORY_POINTS = 1000
"""The newest points of a board's history a page shows."""


def counts(submission: Submission) -> bool:
    """Only ranked runs (secret seed) that passed with a score enter a leaderboard."""
    return submission.mode == RANKED_MODE and submission.status == "PASSED" and submission.score is not None


def score_interval(evaluation: dict[str, Any] | None) -> tuple[float, float] | None:
    """The score's interval: the weighted geometric mean of the workloads' 95% speedup bounds
    (the score is the same mean of the speedups); None when a workload has no interval."""
    if not evaluation:
        return None
    bounds = [(w.get("weight", 1.0), w.get("speedup_ci95")) for w in evaluation.get("workloads", [])]
    if not bounds or any(b is None or min(b) <= 0 for _, b in bounds):
        return None
    total = sum(weight for weight, _ in bounds)
    low = math.exp(sum(weight * math.log(b[0]) for weight, b in bounds) / total)
    high = math.exp(sum(weight * math.log(b[1]) for weight, b in bounds) / total)
    return low, high


def _upsert_best(
    session: Session, table: type[LeaderboardEntry] | type[HeldBest], values: dict, key: list[str]
) -> None:
    """Raise the row if this result beats it, atomically (an upsert with a condition), so
    concurrent results for one user cannot lose the better one."""
    statement = dialect_insert(session, table).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=key,
        set_={k: statement.excluded[k] for k in values if k not in key},
        where=table.score < statement.excluded.score,
    )
    session.execute(statement)


_BOARD_KEY = ["problem_id", "device_kind", "user_id"]


def record_result(session: Session, submission: Submission, evaluation: dict[str, Any] | None = None) -> None:
    """Enter an accepted result into the precomputed rows: the user's best (held while its
    contest is frozen) and, when it beats the public best before it, a history point."""
    if not counts(submission):
        return
    assert submission.score is not None
    at = submission.finished_at or utcnow()
    interval = score_interval(evaluation)
    values: dict[str, Any] = dict(
        problem_id=submission.problem_id,
        device_kind=submission.device_kind,
        user_id=submission.user_id,
        submission_id=submission.id,
        score=submission.score,
        achieved_at=at,
        score_low=interval[0] if interval else None,
        score_high=interval[1] if interval else None,
    )
    contest_id = None
    if holdback.is_held(submission.held_until, utcnow()):
        contest_id = session.scalar(select(ContestEntry.contest_id).where(ContestEntry.submission_id == submission.id))
    if contest_id is not None:
        values.update(contest_id=contest_id, held_until=submission.held_until)
        _upsert_best(session, HeldBest, values, [*_BOARD_KEY, "contest_id"])
    else:
        _upsert_best(session, LeaderboardEntry, values, _BOARD_KEY)
    public_best = session.scalar(
        select(func.max(BestPointRow.score)).where(
            BestPointRow.problem_id == submission.problem_id,
            BestPointRow.device_kind == submission.device_kind,
            BestPointRow.held_until.is_(None),
            BestPointRow.at <= at,
        )
    )
    if public_best is None or submission.score > public_best:
        session.execute(
            insert(BestPointRow).values(
                problem_id=submission.problem_id,
                device_kind=submission.device_kind,
                at=at,
                score=submission.score,
                user_id=submission.user_id,
                submission_id=submission.id,
                held_until=submission.held_until if contest_id is not None else None,
                contest_id=contest_id,
            )
        )


_DUE = select(HeldBest.problem_id).where(HeldBest.held_until <= bindparam("now")).limit(1)


def release_due(db: Database, now: dt.datetime | None = None) -> bool:
    """Fold the held bests whose contests have ended into the public leaderboard (and clear the
    holds of their history points). One indexed read when there is nothing to fold; a page
    calls it before it reads the leaderboards. True when something was folded."""
    now = now or utcnow()
    with db.read() as session:
        if session.connection().execute(_DUE, {"now": now}).first() is None:
            return False
    with db.write() as session:
        return fold(session, now)


def fold(session: Session, now: dt.datetime) -> bool:
    """Move the held bests released by `now` into the public leaderboard (each raising the
    user's row only if it beats it). Plain statements: two servers folding at once upsert the
    same rows and delete them, the second deleting none (no ORM object to find gone)."""
    columns = (
        "problem_id",
        "device_kind",
        "user_id",
        "submission_id",
        "score",
        "achieved_at",
        "score_low",
        "score_high",
    )
    released = session.execute(
        select(*(getattr(HeldBest, c) for c in columns), HeldBest.contest_id).where(HeldBest.held_until <= now)
    ).all()
    for row in released:
        _upsert_best(session, LeaderboardEntry, dict(zip(columns, row[:-1])), _BOARD_KEY)
        session.execute(
            delete(HeldBest).where(
                HeldBest.problem_id == row.problem_id,
                HeldBest.device_kind == row.device_kind,
                HeldBest.user_id == row.user_id,
                HeldBest.contest_id == row.contest_id,
            )
        )
    session.execute(update(BestPointRow).where(BestPointRow.held_until <= now).values(held_until=None, contest_id=None))
    return bool(released)


@dataclass
class Row:
    rank: int
    user: str
    score: float
    submission_id: int
    achieved_at: dt.datetime
    interval: tuple[float, float] | None = None


_COLUMNS = (
    LeaderboardEntry.score,
    LeaderboardEntry.submission_id,
    LeaderboardEntry.achieved_at,
    User.name,
    LeaderboardEntry.score_low,
    LeaderboardEntry.score_high,
)
_READ = (
    select(*_COLUMNS)
    .join(User, User.id == LeaderboardEntry.user_id)
    .where(
        LeaderboardEntry.problem_id == bindparam("problem_id"), LeaderboardEntry.device_kind == bindparam("device_kind")
    )
    .order_by(LeaderboardEntry.score.desc(), LeaderboardEntry.achieved_at)
    .limit(bindparam("limit", type_=Integer))
)
"""Built once: a leaderboard read is the hottest query, and building a statement costs more than running it."""


def held_bests(session: Session, who: Scope, now: dt.datetime, *where: Any) -> list[Any]:
    """Held bests `who` may see (and released ones not folded yet), as _COLUMNS' rows plus
    problem_id, device_kind and user_id."""
    query = (
        select(
            HeldBest.score,
            HeldBest.submission_id,
            HeldBest.achieved_at,
            User.name,
            HeldBest.score_low,
            HeldBest.score_high,
            HeldBest.problem_id,
            HeldBest.device_kind,
            HeldBest.user_id,
        )
        .join(User, User.id == HeldBest.user_id)
        .where(holdback.held_rows_visible(who, now, HeldBest), *where)
    )
    return list(session.execute(query).all())


def merged(public: Iterable[tuple], held: Iterable[tuple], limit: int) -> list[tuple]:
    """Each user's best of their public and held rows (by name, the 4th column), best first."""
    best: dict[str, tuple] = {}
    for row in [*public, *held]:
        kept = best.get(row[3])
        if kept is None or row[0] > kept[0] or (row[0] == kept[0] and row[2] < kept[2]):
            best[row[3]] = tuple(row[:6])
    return sorted(best.values(), key=lambda r: (-r[0], r[2]))[:limit]


def read_rows(
    session: Session, problem_id: int, device_kind: str, limit: int = 100, who: Scope = ANONYMOUS
) -> list[Any]:
    """(score, submission_id, achieved_at, user name, score_low, score_high) best first, as
    plain rows: through the session's connection, without the ORM's per-row bookkeeping. With
    the held bests `who` may see merged in (their own, their contests')."""
    rows = list(
        session.connection()
        .execute(_READ, {"problem_id": problem_id, "device_kind": device_kind, "limit": limit})
        .all()
    )
    held = held_bests(session, who, utcnow(), HeldBest.problem_id == problem_id, HeldBest.device_kind == device_kind)
    return merged(rows, held, limit) if held else rows


def read(session: Session, problem_id: int, device_kind: str, limit: int = 100, who: Scope = ANONYMOUS) -> list[Row]:
    return [
        Row(
            rank=i + 1,
            user=name,
            score=score,
            submission_id=sid,
            achieved_at=at,
            interval=(low, high) if low is not None and high is not None else None,
        )
        for i, (score, sid, at, name, low, high) in enumerate(read_rows(session, problem_id, device_kind, limit, who))
    ]


@dataclass
class Point:
    at: dt.datetime
    score: float
    user: str
    submission_id: int


def history(session: Session, problem_id: int, device_kind: str, who: Scope = ANONYMOUS) -> list[Point]:
    """Each moment the best ranked score on this board went up, as `who` may see it (the
    newest HISTORY_POINTS points written; those that beat no point before them dropped)."""
    query = (
        select(BestPointRow.at, BestPointRow.score, User.name, BestPointRow.submission_id)
        .join(User, User.id == BestPointRow.user_id)
        .where(
            BestPointRow.problem_id == problem_id,
            BestPointRow.device_kind == device_kind,
            holdback.held_rows_visible(who, utcnow(), BestPointRow),
        )
        .order_by(BestPointRow.at.desc(), BestPointRow.id.desc())
        .limit(HISTORY_POINTS)
    )
    points: list[Point] = []
    for at, score, user, sid in reversed(session.execute(query).all()):
        if not points or score > points[-1].score:
            points.append(Point(at=at, score=score, user=user, submission_id=sid))
    return points


def recompute(session: Session, problem_id: int, device_kind: str) -> list[tuple[str, float, int]]:
    """The public leaderboard from the submissions themselves (for consistency checks): the
    results held by a contest's freeze left out."""
    best: dict[str, tuple[float, int]] = {}
    now = utcnow()
    query = select(Submission).where(
        Submission.problem_id == problem_id,
        Submission.device_kind == device_kind,
        Submission.mode == RANKED_MODE,
        Submission.status == "PASSED",
    )
    for s in session.scalars(query.order_by(Submission.finished_at)):
        if holdback.is_held(s.held_until, now):
            continue
        if s.score is not None and (s.user.name not in best or s.score > best[s.user.name][0]):
            best[s.user.name] = (s.score, s.id)
    return sorted(((u, sc, sid) for u, (sc, sid) in best.items()), key=lambda r: -r[1])


def rebuild(session: Session, now: dt.datetime | None = None) -> None:
    """Build every precomputed row again from the stored submissions and results (a database
    filled in bulk, bench/page_cost.py; or a check of the kept ones): what record_result would
    have written, result by result, in the order they finished."""
    now = now or utcnow()
    for table in (LeaderboardEntry, HeldBest, BestPointRow):
        session.execute(delete(table))
    query = (
        select(
            Submission.id,
            Submission.problem_id,
            Submission.device_kind,
            Submission.user_id,
            Submission.score,
            Submission.finished_at,
            Submission.held_until,
            ContestEntry.contest_id,
        )
        .outerjoin(ContestEntry, ContestEntry.submission_id == Submission.id)
        .where(
            Submission.mode == RANKED_MODE,
            Submission.status == "PASSED",
            Submission.score.is_not(None),
            Submission.finished_at.is_not(None),
        )
        .order_by(Submission.finished_at, Submission.id)
    )
    public: dict[tuple, dict] = {}
    held: dict[tuple, dict] = {}
    top: dict[tuple, float] = {}
    points: list[dict] = []
    for sid, problem_id, kind, user_id, score, at, until, contest_id in session.execute(query):
        assert score is not None  # selected where not None
        row = dict(
            problem_id=problem_id, device_kind=kind, user_id=user_id, submission_id=sid, score=score, achieved_at=at
        )
        is_held = contest_id is not None and holdback.is_held(until, now)
        kept, key = (
            (held, (problem_id, kind, user_id, contest_id)) if is_held else (public, (problem_id, kind, user_id))
        )
        if key not in kept or score > kept[key]["score"]:
            kept[key] = row | (dict(contest_id=contest_id, held_until=until) if is_held else {})
        board = (problem_id, kind)
        if board not in top or score > top[board]:
            points.append(
                dict(
                    problem_id=problem_id,
                    device_kind=kind,
                    at=at,
                    score=score,
                    user_id=user_id,
                    submission_id=sid,
                    held_until=until if is_held else None,
                    contest_id=contest_id if is_held else None,
                )
            )
            if not is_held:
                top[board] = score
    wanted = [r["submission_id"] for r in [*public.values(), *held.values()]]
    intervals: dict[int, tuple[float, float] | None] = {}
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        for sid, evaluation in session.execute(
            select(Result.submission_id, Result.evaluation).where(Result.submission_id.in_(chunk))
        ):
            intervals[sid] = score_interval(evaluation)
    for rows in (public, held):
        for r in rows.values():
            interval = intervals.get(r["submission_id"])
            r.update(score_low=interval[0] if interval else None, score_high=interval[1] if interval else None)
    for table, rows_ in (
        (LeaderboardEntry, list(public.values())),
        (HeldBest, list(held.values())),
        (BestPointRow, points),
    ):
        if rows_:
            session.execute(insert(table), rows_)
