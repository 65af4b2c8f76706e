"""The queue under concurrent claimers (threads and separate processes), and the migrations."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import Counter

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, func, select

from gpuarena.contracts.records import Evaluation, Status
from gpuarena.service import queue
from gpuarena.service.auth import add_user
from gpuarena.service.db import normalise_url
from gpuarena.service.tables import Base, Job, Problem, Result, Runner, SolutionBlob, Submission

JOBS = 60


def _fill(db, jobs: int = JOBS) -> list[int]:
    with db.write() as session:
        user = add_user(session, "alice")
        runner_user = add_user(session, "runners", "runner")
        runners = [Runner(user_id=runner_user.id, name=f"r{i}") for i in range(8)]
        session.add_all(runners)
        problem = session.scalar(select(Problem))
        session.add(SolutionBlob(hash="a" * 64, name="s", language="pytorch", manifest={}, sources={}, size=0))
        for i in range(jobs):
            s = Submission(
                user_id=user.id,
                problem_id=problem.id,
                solution_hash="a" * 64,
                device_kind="cpu" if i % 3 else "H100",
                mode="ranked",
            )
            session.add(s)
            session.flush()
            queue.enqueue(session, s)
        session.flush()
        return [r.id for r in runners]


def _evaluation(score: float) -> Evaluation:
    return Evaluation(
        status=Status.PASSED, problem="axpy_dest", solution_hash="a" * 64, device="cpu", mode="ranked", score=score
    )


def test_threads_claim_each_job_exactly_once(db) -> None:
    runner_ids = _fill(db)
    claimed: list[int] = []

    def work(runner_id: int) -> None:
        while (got := queue.claim(db, runner_id, ["cpu", "H100"])) is not None:
            claimed.append(got.job.id)
            queue.complete(db, runner_id, got.job.id, got.job.lease_token, _evaluation(1.0 + got.job.id / 100))

    threads = [threading.Thread(target=work, args=(rid,)) for rid in runner_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed) == list(range(1, JOBS + 1))
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(Result)) == JOBS
        assert set(session.scalars(select(Job.state))) == {"done"}
        assert set(session.scalars(select(Submission.status))) == {"PASSED"}


WORKER = """
import json, sys
from gpuarena.service import queue
from gpuarena.service.db import Database
from gpuarena.contracts.records import Evaluation, Status
db = Database(sys.argv[1]); runner_id = int(sys.argv[2]); kinds = sys.argv[3].split(",")
got = []
while (c := queue.claim(db, runner_id, kinds)) is not None:
    got.append(c.job.id)
    queue.complete(db, runner_id, c.job.id, c.job.lease_token,
                   Evaluation(status=Status.PASSED, problem="p", solution_hash="a" * 64, device="cpu", mode="ranked", score=1.0))
print(json.dumps(got))
"""


def test_processes_claim_each_job_exactly_once_and_by_kind(db, database_url) -> None:
    runner_ids = _fill(db)
    kinds = ["cpu", "cpu", "cpu", "H100"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, database_url, str(rid), kind], stdout=subprocess.PIPE, text=True
        )
        for rid, kind in zip(runner_ids, kinds)
    ]
    results = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    every = [job for got in results for job in got]
    assert Counter(every) == Counter(range(1, JOBS + 1))  # each job once, none lost
    with db.read() as session:
        h100_jobs = set(session.scalars(select(Job.id).where(Job.device_kind == "H100")))
    assert set(results[3]) == h100_jobs  # routed by device kind
    assert not (set().union(*map(set, results[:3])) & h100_jobs)


def test_migrations_match_the_models(db, database_url) -> None:
    engine = create_engine(normalise_url(database_url))
    with engine.connect() as connection:
        diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    engine.dispose()
    assert diff == [], f"tables.py and the migrations differ; add a migration: {diff}"
