"""bench/service.py's database: a fresh SQLite file or PostgreSQL database, seeded in bulk
with accounts and stored submissions (each with its finished job, its result and the
leaderboard entries they imply), as a service that has run for a while would hold.

Split from service.py so that the seeding is read apart from the measuring; service.py and
contest_leaderboard_reads.py import it (through service.py's names).
"""

from __future__ import annotations

import datetime as dt
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlalchemy import create_engine, insert, select, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuarena.service.auth import hash_token  # noqa: E402
from gpuarena.service.db import Database, normalise_url  # noqa: E402
from gpuarena.service.migrate import upgrade  # noqa: E402
from gpuarena.service.tables import (  # noqa: E402
    DeviceKind,
    Job,
    LeaderboardEntry,
    Problem,
    Result,
    Runner,
    SolutionBlob,
    Submission,
    Token,
    User,
    utcnow,
)

PROBLEM = "level1/softmax"
SOURCE = "import torch\n\n\ndef solve(x):\n    return torch.softmax(x, dim=-1)\n"
EVALUATION = {
    "status": "PASSED",
    "reason": "",
    "problem": PROBLEM,
    "solution_hash": "b" * 64,
    "device": "cpu",
    "mode": "ranked",
    "workloads": [],
    "log": "x" * 2000,
}


def fresh_database(kind: str, workdir: Path) -> str:
    if kind == "sqlite":
        return f"sqlite:///{workdir / 'bench.db'}"
    env = {
        **os.environ,
        "GPUARENA_PG_FSYNC": "on",
        "GPUARENA_PG_DATA": str(Path(tempfile.gettempdir()) / "gpuarena-bench-pg"),
    }
    server = (
        subprocess.run(
            ["bash", str(ROOT / "scripts/postgres.sh"), "55433"], env=env, capture_output=True, text=True, check=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    admin = create_engine(normalise_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text("DROP DATABASE IF EXISTS gpuarena_bench WITH (FORCE)"))
        connection.execute(text("CREATE DATABASE gpuarena_bench"))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/gpuarena_bench"


def seed(url: str, stored: int, users: int) -> dict:
    """Accounts, and `stored` finished ranked submissions spread over `users` users, with the
    leaderboard entries they imply; written in bulk straight into the database."""
    upgrade(url)
    db = Database(url)
    from gpuarena.problems.loader import bundled_root
    from gpuarena.service.catalog import sync_problems

    sync_problems(db, [bundled_root()])
    rng = random.Random(0)
    tokens = {}
    with db.write() as session:
        problem_id = session.scalar(select(Problem.id).where(Problem.slug == PROBLEM, Problem.current))
        session.add(DeviceKind(name="cpu"))
        session.execute(
            insert(User),
            [{"name": f"user{i}", "role": "participant"} for i in range(users)]
            + [{"name": "runner", "role": "runner"}],
        )
        ids = dict(session.execute(select(User.name, User.id)).all())
        for name, uid in ids.items():
            tokens[name] = f"gpa_bench_{name}"
            session.add(Token(user_id=uid, name="bench", prefix=tokens[name][:12], hash=hash_token(tokens[name])))
        session.add(
            SolutionBlob(
                hash="b" * 64,
                name="seed",
                language="pytorch",
                manifest={"language": "pytorch", "entry_point": "s.py:solve"},
                sources={"s.py": SOURCE},
                size=len(SOURCE),
            )
        )
        runner = Runner(
            user_id=ids["runner"],
            name="bench-runner",
            device_kinds=["cpu"],
            devices=[{"device": "cpu", "kind": "cpu", "name": "bench", "healthy": True}],
        )
        session.add(runner)
        session.flush()
        runner_id = runner.id
    best: dict[int, tuple[float, int, dt.datetime]] = {}
    batch = []
    now = utcnow()
    for i in range(stored):
        uid = ids[f"user{rng.randrange(users)}"]
        score = rng.lognormvariate(0, 0.5)
        at = now - dt.timedelta(seconds=stored - i)
        batch.append(
            dict(
                user_id=uid,
                problem_id=problem_id,
                solution_hash="b" * 64,
                device_kind="cpu",
                mode="ranked",
                status="PASSED",
                reason="",
                score=score,
                created_at=at,
                finished_at=at,
            )
        )
        if len(batch) == 5000 or i == stored - 1:
            # each stored submission comes with its finished job and its result, as in a real database
            with db.write() as session:
                first_id = (session.scalar(select(Submission.id).order_by(Submission.id.desc()).limit(1)) or 0) + 1
                session.execute(insert(Submission), batch)
                session.execute(
                    insert(Job),
                    [
                        dict(
                            id=first_id + k,
                            submission_id=first_id + k,
                            device_kind="cpu",
                            state="done",
                            attempts=1,
                            runner_id=runner_id,
                            queued_at=row["created_at"],
                            claimed_at=row["created_at"],
                            finished_at=row["finished_at"],
                        )
                        for k, row in enumerate(batch)
                    ],
                )
                session.execute(
                    insert(Result),
                    [
                        dict(
                            job_id=first_id + k,
                            submission_id=first_id + k,
                            runner_id=runner_id,
                            status="PASSED",
                            score=row["score"],
                            evaluation=EVALUATION | {"score": row["score"]},
                            created_at=row["finished_at"],
                        )
                        for k, row in enumerate(batch)
                    ],
                )
            for offset, row in enumerate(batch):
                if row["user_id"] not in best or row["score"] > best[row["user_id"]][0]:
                    best[row["user_id"]] = (row["score"], first_id + offset, row["finished_at"])
            batch = []
    with db.write() as session:
        session.execute(
            insert(LeaderboardEntry),
            [
                dict(
                    problem_id=problem_id,
                    device_kind="cpu",
                    user_id=uid,
                    submission_id=sid,
                    score=score,
                    achieved_at=at,
                )
                for uid, (score, sid, at) in best.items()
            ],
        )
    if db.is_postgres:  # the ids were given explicitly: move the sequences past them, then refresh statistics
        with db.write() as session:
            for table in ("submissions", "jobs", "results"):
                session.execute(
                    text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")
                )
        with db.write_engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("VACUUM ANALYZE"))
    else:
        with db.write() as session:
            session.execute(text("ANALYZE"))
    db.dispose()
    return {"tokens": tokens, "runner_id": runner_id}
