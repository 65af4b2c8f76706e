"""A page costs the same at any number of stored submissions (issue 46, item 9): the problem
page (leaderboards and their history), the leaderboard, a user's page and a contest's page read
kept rows and bounded, indexed queries. Measured as database work, never as time: SQLite's
virtual-machine steps for the page's statements, PostgreSQL's rows read by the scans of each
statement's plan (EXPLAIN ANALYZE, planned as at scale: no sequential or bitmap scans of tables
a test keeps small). The same pages at six times the submissions must cost no
more than a quarter more. Before: the problem page read every passing ranked submission for its
history, the user page sorted all of the user's submissions, the contest page counted its
entries. bench/page_cost.py measures the time."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, insert, select, text

from gpuarena.service import contest_standings, leaderboard
from gpuarena.service.app import create_app
from gpuarena.service.db import Database
from gpuarena.service.tables import (
    ContestEntry,
    ContestOrganizer,
    ContestRow,
    DeviceKind,
    Job,
    Problem,
    Result,
    Runner,
    SolutionBlob,
    Submission,
    User,
    utcnow,
)

USERS = 10
SMALL, LARGE = 1500, 9000
PAGES = {
    "problem": "/problems/axpy_dest",
    "leaderboard": "/api/leaderboard?problem=axpy_dest&device_kind=cpu",
    "user": "/users/user3",
    "contest": "/contests/big",
}


class Stored:
    """Users, a contest over the fixture problem (ended: its entries all shown), and
    submissions written in bulk, with the kept rows rebuilt from them."""

    def __init__(self, db: Database):
        self.db = db
        self.rng = random.Random(46)
        self.written = 0
        self.end = utcnow() - dt.timedelta(hours=1)
        with db.write() as session:
            session.add(DeviceKind(name="cpu"))
            session.add_all(User(name=f"user{i}", role="participant") for i in range(USERS))
            session.add(User(name="olga", role="organiser"))
            session.flush()
            self.ids = dict(session.execute(select(User.name, User.id)).all())
            runner = Runner(user_id=self.ids["olga"], name="box", device_kinds=["cpu"], devices=[])
            session.add(runner)
            session.add(
                SolutionBlob(hash="b" * 64, name="sol", language="pytorch", manifest={}, sources={"sol.py": ""}, size=0)
            )
            self.problem_id = session.scalar(select(Problem.id).where(Problem.slug == "axpy_dest", Problem.current))
            start = self.end - dt.timedelta(days=30)
            config = {
                "slug": "big",
                "title": "Big",
                "start": start.isoformat() + "Z",
                "end": self.end.isoformat() + "Z",
                "problems": ["axpy_dest"],
                "device_kinds": ["cpu"],
                "rule": {"name": "fastest"},
            }
            contest = ContestRow(
                slug="big", title="Big", config=config, start=start, end=self.end, created_by=self.ids["olga"]
            )
            session.add(contest)
            session.flush()
            session.add(ContestOrganizer(contest_id=contest.id, user_id=self.ids["olga"]))
            self.runner_id, self.contest_id = runner.id, contest.id

    def add(self, count: int) -> None:
        rows = []
        for _ in range(count):
            i = self.written
            self.written += 1
            passed = self.rng.random() < 0.9
            score = self.rng.lognormvariate(0, 0.5) if passed else None
            at = self.end - dt.timedelta(days=20) + dt.timedelta(seconds=30 * i)
            rows.append((i + 1, self.ids[f"user{self.rng.randrange(USERS)}"], passed, score, at))
        with self.db.write() as session:
            session.execute(
                insert(Submission),
                [
                    dict(
                        id=sid,
                        user_id=uid,
                        problem_id=self.problem_id,
                        solution_hash="b" * 64,
                        device_kind="cpu",
                        mode="ranked",
                        status="PASSED" if passed else "WRONG_VALUES",
                        reason="",
                        score=score,
                        created_at=at,
                        finished_at=at,
                    )
                    for sid, uid, passed, score, at in rows
                ],
            )
            session.execute(
                insert(Job),
                [
                    dict(id=sid, submission_id=sid, device_kind="cpu", state="done", runner_id=self.runner_id)
                    for sid, *_ in rows
                ],
            )
            session.execute(
                insert(Result),
                [
                    dict(
                        job_id=sid,
                        submission_id=sid,
                        status="PASSED" if passed else "WRONG_VALUES",
                        score=score,
                        evaluation={"workloads": [{"speedup_ci95": [score * 0.9, score * 1.1]}] if score else []},
                    )
                    for sid, uid, passed, score, at in rows
                ],
            )
            session.execute(
                insert(ContestEntry),
                [
                    dict(
                        submission_id=sid,
                        contest_id=self.contest_id,
                        user_id=uid,
                        contestant=f"c{uid}",
                        submitted_at=at,
                        review="pending",
                        review_comment="",
                        bonus=[],
                        updated_at=at,
                    )
                    for sid, uid, passed, score, at in rows
                    if sid % 3 == 0
                ],
            )
            leaderboard.rebuild(session)
            session.execute(
                text(
                    "UPDATE contests SET entries_count = "
                    "(SELECT count(*) FROM contest_entries WHERE contest_entries.contest_id = contests.id)"
                )
            )
            session.execute(text("ANALYZE"))
        if self.db.is_postgres:
            with self.db.write() as session:
                for table in ("submissions", "jobs"):
                    session.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), {self.written})"))


class Work:
    """The database work of the statements run while counting."""

    def __init__(self, db: Database):
        self.db, self.counting, self.steps = db, False, 0
        self.statements: list[tuple[str, object]] = []
        for engine in {db.read_engine, db.write_engine}:
            if db.is_postgres:
                event.listen(engine, "before_cursor_execute", self._statement)
            else:
                event.listen(engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_connection, _record) -> None:
        def tick() -> int:
            if self.counting:
                self.steps += 1
            return 0

        dbapi_connection.set_progress_handler(tick, 16)

    def _statement(self, _conn, _cursor, statement, parameters, _context, _many) -> None:
        if self.counting and statement.lstrip().upper().startswith("SELECT"):
            self.statements.append((statement, parameters))

    @contextmanager
    def counted(self) -> Iterator[None]:
        self.steps, self.statements, self.counting = 0, [], True
        try:
            yield
        finally:
            self.counting = False

    def cost(self) -> int:
        if not self.db.is_postgres:
            return self.steps
        raw = self.db.read_engine.raw_connection()
        try:
            cursor = raw.cursor()
            # planned as at scale: a test's tables are small enough to read whole or through a bitmap
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            total = 0
            for statement, parameters in self.statements:
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, parameters)
                plan = cursor.fetchone()[0]
                total += _rows_read((json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"])
            raw.rollback()
            return total
        finally:
            raw.close()


def _rows_read(node: dict) -> int:
    """Rows the plan's scans produced or filtered away, over all their loops."""
    rows = 0
    if "Scan" in node["Node Type"]:
        loops = node.get("Actual Loops", 1)
        kept = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        rows += int(kept * loops) + node.get("Rows Removed by Index Recheck", 0)
    return rows + sum(_rows_read(child) for child in node.get("Plans", []))


def _costs(settings, url: str) -> dict[str, int]:
    contest_standings._kept.clear()  # the contest's entries were written behind the process's back
    db = Database(url)
    work = Work(db)
    client = TestClient(create_app(settings, db), raise_server_exceptions=True)
    costs = {}
    for name, path in PAGES.items():
        for _ in range(2):  # warm: the contest's entries kept, statements compiled
            assert client.get(path).status_code == 200, path
        with work.counted():
            assert client.get(path).status_code == 200, path
        costs[name] = work.cost()
    client.close()
    db.dispose()
    return costs


@pytest.fixture
def stored(db) -> Stored:
    return Stored(db)


def test_pages_cost_the_same_at_six_times_the_submissions(stored, settings, database_url) -> None:
    stored.add(SMALL)
    small = _costs(settings, database_url)
    stored.add(LARGE - SMALL)
    large = _costs(settings, database_url)
    for page in PAGES:
        assert small[page] > 0, page
        assert large[page] <= small[page] * 1.25 + 64, (page, small, large)


def test_a_page_reads_the_kept_rows_through_indexes(stored, db) -> None:
    """The reads that could grow with the submissions are planned on their indexes: a user's
    and a problem's newest submissions, a board's rows, its history, a user's rows."""
    stored.add(SMALL)
    problem, user = stored.problem_id, stored.ids["user3"]
    board = f"problem_id = {problem} AND device_kind = 'cpu'"
    plans = {
        f"SELECT id FROM submissions WHERE user_id = {user} ORDER BY id DESC LIMIT 100": "ix_submissions_user_newest",
        # SQLite's one-column index holds the rowid (the id) after the problem: in order too
        f"SELECT id FROM submissions WHERE problem_id = {problem} ORDER BY id DESC LIMIT 10": (
            "ix_submissions_problem_newest" if db.is_postgres else "ix_submissions_problem_"
        ),
        f"SELECT score FROM leaderboard_entries WHERE {board} ORDER BY score DESC LIMIT 100": "ix_leaderboard_read",
        f"SELECT at, score FROM best_points WHERE {board} ORDER BY at DESC LIMIT 1000": "ix_best_points_board",
        f"SELECT score FROM leaderboard_entries WHERE user_id = {user}": "ix_leaderboard_user",
        "SELECT score FROM held_bests WHERE held_until <= '2030-01-01' LIMIT 1": "ix_held_bests_until",
    }
    with db.read() as session:
        for query, index in plans.items():
            if db.is_postgres:
                session.execute(text("SET LOCAL enable_seqscan = off"))  # tables this small are read whole anyway
                session.execute(text("SET LOCAL enable_bitmapscan = off"))
                plan = "\n".join(r[0] for r in session.execute(text("EXPLAIN " + query)))
                # an index gives the order, so LIMIT stops early (at this size PostgreSQL may walk
                # the primary key backwards instead of a user's index: bounded too)
                assert "Sort" not in plan and "Index" in plan, (query, plan)
            else:
                plan = "\n".join(str(r[-1]) for r in session.execute(text("EXPLAIN QUERY PLAN " + query)))
                assert "TEMP B-TREE" not in plan and index in plan, (query, plan)
    if db.is_postgres:
        with db.read() as session:
            indexes = set(session.scalars(text("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")))
        assert set(plans.values()) - {"ix_submissions_problem_"} <= indexes
