"""Migration 0008 on a database that has lived under 0007, on SQLite and PostgreSQL: the chain
stays linear, the late entries of a frozen contest get their hold, the leaderboard that showed
the held result is built again without it (the result waits in held_bests), and the history,
the intervals and the contests' counts of entries are filled from the stored submissions."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory
from tests.databases import postgres_database

from gpuarena.service.db import normalise_url
from gpuarena.service.migrate import MIGRATIONS, alembic_config, current, upgrade

NOW = dt.datetime.now(dt.UTC).replace(tzinfo=None, microsecond=0)


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'old.db'}"
    else:
        with postgres_database() as url:
            yield url


def _put(connection: sa.Connection, table: str, **values: object) -> None:
    def kind(value: object) -> sa.types.TypeEngine | None:
        if isinstance(value, dict | list):
            return sa.JSON()
        return sa.DateTime() if isinstance(value, dt.datetime) else None

    columns = [sa.column(name, kind(value)) for name, value in values.items()]
    connection.execute(sa.insert(sa.table(table, *columns)).values(**values))


def _evaluation(score: float) -> dict:
    return {"workloads": [{"weight": 1.0, "speedup_ci95": [score * 0.9, score * 1.1]}], "score": score}


def test_the_chain_is_linear_through_0008() -> None:
    scripts = ScriptDirectory.from_config(alembic_config("sqlite://"))
    assert len(scripts.get_heads()) == 1
    chain = [s.revision for s in scripts.walk_revisions()][::-1]
    assert chain == [f"{n:04d}" for n in range(1, len(chain) + 1)]  # one line: 0001, 0002, ...
    assert scripts.get_revision("0008").down_revision == "0007"
    assert (MIGRATIONS / "versions" / "0008_held_results_kept_boards.py").is_file()


def test_upgrade_from_0007_holds_the_late_entries_and_builds_the_kept_rows(empty_url: str) -> None:
    upgrade(empty_url, "0007")
    engine = sa.create_engine(normalise_url(empty_url))
    end = NOW + dt.timedelta(hours=1)  # frozen since an hour ago (freeze_hours = 2)
    with engine.begin() as c:
        for uid, name, role in ((1, "alice", "participant"), (2, "bob", "participant"), (3, "olga", "organiser")):
            _put(c, "users", id=uid, name=name, role=role, created_at=NOW)
        _put(
            c,
            "problems",
            id=1,
            slug="axpy",
            version=1,
            current=True,
            content_hash="h",
            name="axpy",
            level=1,
            weight=1.0,
            summary="",
            spec={"workloads": []},
            files={},
            secret_seed=0,
            solutions_public=False,
            created_at=NOW,
        )
        _put(
            c, "solution_blobs", hash="b", name="s", language="pytorch", manifest={}, sources={}, size=0, created_at=NOW
        )
        config = {
            "slug": "spring",
            "title": "Spring",
            "start": (NOW - dt.timedelta(hours=5)).isoformat() + "Z",
            "end": end.isoformat() + "Z",
            "problems": ["axpy"],
            "device_kinds": ["cpu"],
            "freeze_hours": 2,
            "rule": {"name": "fastest"},
        }
        _put(
            c,
            "contests",
            id=1,
            slug="spring",
            title="Spring",
            description="",
            config=config,
            start=NOW - dt.timedelta(hours=5),
            end=end,
            teams=False,
            created_by=3,
            created_at=NOW,
        )
        runs = [  # id, user, score, when, entered
            (1, 2, 1.5, NOW - dt.timedelta(hours=4), False),  # bob, outside the contest
            (2, 1, 2.0, NOW - dt.timedelta(hours=3), True),  # alice, before the freeze
            (3, 1, 7.25, NOW - dt.timedelta(minutes=30), True),  # alice, during the freeze: the leak
        ]
        for sid, uid, score, at, entered in runs:
            _put(
                c,
                "submissions",
                id=sid,
                user_id=uid,
                problem_id=1,
                solution_hash="b",
                device_kind="cpu",
                mode="ranked",
                status="PASSED",
                reason="",
                score=score,
                created_at=at,
                finished_at=at,
            )
            _put(c, "jobs", id=sid, submission_id=sid, device_kind="cpu", state="done", attempts=1, max_attempts=3,
                 device="", queued_at=at, last_error="")  # fmt: skip
            _put(c, "results", id=sid, job_id=sid, submission_id=sid, status="PASSED", score=score,
                 evaluation=_evaluation(score), created_at=at)  # fmt: skip
            if entered:
                _put(c, "contest_entries", submission_id=sid, contest_id=1, user_id=uid, contestant="alice",
                     submitted_at=at, review="pending", review_comment="", merged_upstream=False, bonus=[],
                     samples_accepted=0, samples_score=0.0, updated_at=at)  # fmt: skip
        for uid, sid, score, at in ((1, 3, 7.25, runs[2][3]), (2, 1, 1.5, runs[0][3])):  # as 0007's service kept them
            _put(c, "leaderboard_entries", problem_id=1, device_kind="cpu", user_id=uid, submission_id=sid,
                 score=score, achieved_at=at)  # fmt: skip
    upgrade(empty_url, "0008")
    assert current(empty_url) == "0008"
    with engine.connect() as c:
        held = dict(c.execute(sa.text("SELECT id, held_until FROM submissions")).all())
        assert held[1] is None and held[2] is None and held[3] is not None
        board = sorted(c.execute(sa.text("SELECT user_id, submission_id, score, score_low FROM leaderboard_entries")))
        assert [(u, s, score) for u, s, score, _ in board] == [(1, 2, 2.0), (2, 1, 1.5)]  # 7.25 no longer shown
        assert board[0][3] == pytest.approx(1.8)
        assert list(c.execute(sa.text("SELECT user_id, contest_id, submission_id, score FROM held_bests"))) == [
            (1, 1, 3, 7.25)
        ]
        points = list(c.execute(sa.text("SELECT submission_id, held_until IS NOT NULL FROM best_points ORDER BY at")))
        assert [(s, bool(h)) for s, h in points] == [(1, False), (2, False), (3, True)]
        assert c.execute(sa.text("SELECT entries_count FROM contests")).scalar() == 2
    engine.dispose()
    upgrade(empty_url)  # and on to the newest revision
