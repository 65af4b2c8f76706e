"""results held by a contest's freeze; leaderboards, their history and intervals kept as rows

Issue 46, items 4 and 9: submissions.held_until (a contest entry made during the freeze: its
result is held until the contest's end), held_bests (the bests held meanwhile), best_points
(the leaderboards' history), the score's interval on leaderboard_entries, and the indexes that
bound a page's reads (a user's and a problem's newest submissions, a user's leaderboard rows).
Existing databases are filled from their submissions: the holds from the contests' freezes, then
every kept row as the service would have written it result by result, and each contest's count
of entries (contests.entries_count).

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 12:00:00.000000
"""

import datetime as dt
import json
import math

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("submissions", sa.Column("held_until", sa.DateTime(), nullable=True))
    op.add_column("contests", sa.Column("entries_count", sa.Integer(), nullable=False, server_default="0"))
    op.create_index("ix_submissions_user_newest", "submissions", ["user_id", "id"], unique=False)
    op.create_index("ix_submissions_problem_newest", "submissions", ["problem_id", "id"], unique=False)
    op.add_column("leaderboard_entries", sa.Column("score_low", sa.Float(), nullable=True))
    op.add_column("leaderboard_entries", sa.Column("score_high", sa.Float(), nullable=True))
    op.create_index("ix_leaderboard_user", "leaderboard_entries", ["user_id"], unique=False)
    op.create_table(
        "held_bests",
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("device_kind", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("contest_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("achieved_at", sa.DateTime(), nullable=False),
        sa.Column("score_low", sa.Float(), nullable=True),
        sa.Column("score_high", sa.Float(), nullable=True),
        sa.Column("held_until", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["contest_id"], ["contests.id"]),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"]),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("problem_id", "device_kind", "user_id", "contest_id"),
    )
    op.create_index("ix_held_bests_board", "held_bests", ["problem_id", "device_kind", "score"], unique=False)
    op.create_index("ix_held_bests_until", "held_bests", ["held_until"], unique=False)
    op.create_table(
        "best_points",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("device_kind", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("held_until", sa.DateTime(), nullable=True),
        sa.Column("contest_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["contest_id"], ["contests.id"]),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"]),
        sa.ForeignKeyConstraint(["submission_id"], ["submissions.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_best_points_board", "best_points", ["problem_id", "device_kind", "at"], unique=False)
    _fill(op.get_bind())


def downgrade() -> None:
    op.drop_index("ix_best_points_board", table_name="best_points")
    op.drop_table("best_points")
    op.drop_index("ix_held_bests_until", table_name="held_bests")
    op.drop_index("ix_held_bests_board", table_name="held_bests")
    op.drop_table("held_bests")
    op.drop_index("ix_leaderboard_user", table_name="leaderboard_entries")
    with op.batch_alter_table("leaderboard_entries", schema=None) as batch_op:
        batch_op.drop_column("score_high")
        batch_op.drop_column("score_low")
    op.drop_index("ix_submissions_problem_newest", table_name="submissions")
    op.drop_index("ix_submissions_user_newest", table_name="submissions")
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.drop_column("held_until")
    with op.batch_alter_table("contests", schema=None) as batch_op:
        batch_op.drop_column("entries_count")


# The data, with this revision's own copy of the rules (the service's code may change after it):
# leaderboard.record_result and leaderboard.rebuild write the same rows.


def _interval(evaluation: object) -> tuple[float, float] | None:
    if isinstance(evaluation, str):
        evaluation = json.loads(evaluation)
    if not isinstance(evaluation, dict):
        return None
    bounds = [(w.get("weight", 1.0), w.get("speedup_ci95")) for w in evaluation.get("workloads", [])]
    if not bounds or any(b is None or min(b) <= 0 for _, b in bounds):
        return None
    total = sum(weight for weight, _ in bounds)
    low = math.exp(sum(weight * math.log(b[0]) for weight, b in bounds) / total)
    high = math.exp(sum(weight * math.log(b[1]) for weight, b in bounds) / total)
    return low, high


def _naive(value: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.astimezone(dt.UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _fill(connection: sa.Connection) -> None:
    connection.execute(
        sa.text(
            "UPDATE contests SET entries_count = "
            "(SELECT count(*) FROM contest_entries WHERE contest_entries.contest_id = contests.id)"
        )
    )
    contests = connection.execute(sa.text('SELECT id, config, "end" FROM contests')).all()
    for contest_id, config, end in contests:
        config = json.loads(config) if isinstance(config, str) else config
        hours = float(config.get("freeze_hours") or 0)
        if not hours:
            continue
        end = _naive(end) if isinstance(end, str) else end
        connection.execute(
            sa.text(
                "UPDATE submissions SET held_until = :end WHERE id IN (SELECT submission_id FROM contest_entries "
                "WHERE contest_id = :contest AND submitted_at >= :freeze)"
            ).bindparams(sa.bindparam("end", type_=sa.DateTime()), sa.bindparam("freeze", type_=sa.DateTime())),
            {"end": end, "contest": contest_id, "freeze": end - dt.timedelta(hours=hours)},
        )
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    rows = connection.execute(
        sa.text(
            "SELECT s.id, s.problem_id, s.device_kind, s.user_id, s.score, s.finished_at, s.held_until, e.contest_id "
            "FROM submissions s LEFT JOIN contest_entries e ON e.submission_id = s.id "
            "WHERE s.mode = 'ranked' AND s.status = 'PASSED' AND s.score IS NOT NULL AND s.finished_at IS NOT NULL "
            "ORDER BY s.finished_at, s.id"
        )
    )
    public: dict[tuple, dict] = {}
    held: dict[tuple, dict] = {}
    top: dict[tuple, float] = {}
    points: list[dict] = []
    for sid, problem_id, kind, user_id, score, at, until, contest_id in rows:
        at = _naive(at) if isinstance(at, str) else at
        until = _naive(until) if isinstance(until, str) else until
        is_held = contest_id is not None and until is not None and until > now
        row = dict(
            problem_id=problem_id, device_kind=kind, user_id=user_id, submission_id=sid, score=score, achieved_at=at
        )
        kept, key = (
            (held, (problem_id, kind, user_id, contest_id)) if is_held else (public, (problem_id, kind, user_id))
        )
        if key not in kept or score > kept[key]["score"]:
            kept[key] = row | (dict(contest_id=contest_id, held_until=until) if is_held else {})
        if (problem_id, kind) not in top or score > top[(problem_id, kind)]:
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
                top[(problem_id, kind)] = score
    wanted = [r["submission_id"] for r in [*public.values(), *held.values()]]
    intervals: dict[int, tuple[float, float] | None] = {}
    results = sa.table("results", sa.column("submission_id"), sa.column("evaluation"))
    for i in range(0, len(wanted), 500):
        chunk = wanted[i : i + 500]
        query = sa.select(results.c.submission_id, results.c.evaluation).where(results.c.submission_id.in_(chunk))
        for sid, evaluation in connection.execute(query):
            intervals[sid] = _interval(evaluation)
    for kept in (public, held):
        for r in kept.values():
            interval = intervals.get(r["submission_id"])
            r.update(score_low=interval[0] if interval else None, score_high=interval[1] if interval else None)

    def columns(*names: str) -> list[sa.ColumnClause]:
        return [
            sa.column(n, sa.DateTime()) if n in ("achieved_at", "at", "held_until") else sa.column(n) for n in names
        ]

    board = ("problem_id", "device_kind", "user_id", "submission_id", "score", "achieved_at", "score_low", "score_high")
    entries = sa.table("leaderboard_entries", *columns(*board))
    held_bests = sa.table("held_bests", *columns(*board, "contest_id", "held_until"))
    best_points = sa.table(
        "best_points",
        *columns("problem_id", "device_kind", "at", "score", "user_id", "submission_id", "held_until", "contest_id"),
    )
    connection.execute(sa.delete(entries))
    for table, values in ((entries, list(public.values())), (held_bests, list(held.values())), (best_points, points)):
        if values:
            connection.execute(sa.insert(table), values)
