"""What one view of a page costs the server as stored submissions grow (issue 46, item 9).

For each N (default 1,000, 10,000 and 100,000) a fresh SQLite database is migrated, the bundled
problems synced, and N finished submissions (ranked, 90% passed, 20% of them entered in a
running contest, a few during its freeze) written straight into the tables in bulk, with their
jobs, results and contest entries; the precomputed rows they imply (best per user, the best's
history, results held by a freeze) are built by `leaderboard.rebuild`, as the migration builds
them from a database's submissions. Then the real app answers anonymous views of the problem
page, the leaderboard (the API's and the CSV download), a user's page and the contest page
through an in-process client (no network, no second process): per page the median and 99th
percentile of the wall time per view, and the process CPU per view (the client's share
included: it is the same at every N).

    .venv/bin/python bench/page_cost.py                      # 1k, 10k, 100k
    .venv/bin/python bench/page_cost.py --sizes 1000 --views 50
    .venv/bin/python bench/page_cost.py --out bench/results/page-cost-DATE-cpu-vm.md

A page that reads precomputed rows and bounded, indexed queries costs the same at every N.
Targets live here, not in unit tests (tests/service/test_page_cost.py counts rows read instead).
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import random
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert, select, text

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from gpuarena.service.app import create_app  # noqa: E402
from gpuarena.service.catalog import sync_problems  # noqa: E402
from gpuarena.service.config import Settings  # noqa: E402
from gpuarena.service.db import Database  # noqa: E402
from gpuarena.service.migrate import upgrade  # noqa: E402
from gpuarena.service.tables import (  # noqa: E402
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

PROBLEMS = ["level1/softmax", "level1/add", "level1/gelu", "level1/layernorm", "level1/matmul"]
USERS = 200
CONTEST = "bench-cup"
CONTEST_SHARE = 0.2
HEAVY_SHARE = 0.1
"""user0 makes this share of the submissions: at every N their page lists its full 100."""


def evaluation(problem: str, score: float | None, status: str) -> dict:
    workloads = [
        {
            "name": f"w{k}",
            "status": status,
            "reason": "",
            "weight": 1.0,
            "speedup": score,
            "speedup_ci95": [score * 0.97, score * 1.03] if score else None,
            "max_abs_error": 1e-6,
            "max_rel_error": 1e-6,
        }
        for k in range(4)
    ]
    return {
        "status": status,
        "reason": "" if status == "PASSED" else "values differ",
        "problem": problem,
        "solution_hash": "b" * 64,
        "device": "cpu",
        "mode": "ranked",
        "score": score,
        "workloads": workloads,
        "log": "x" * 2000,
    }


def fill(db: Database, stored: int, seed: int = 46) -> dict:
    """Accounts, a runner, a contest in its freeze and `stored` finished submissions, written in bulk."""
    rng = random.Random(seed)
    now = utcnow()
    span = dt.timedelta(seconds=max(stored, 3600) * 2)  # the submissions' times: one every 2 s, up to now
    with db.write() as session:
        session.add(DeviceKind(name="cpu"))
        session.add_all(User(name=f"user{i}", role="participant") for i in range(USERS))
        session.add(User(name="olga", role="organiser"))
        session.add(User(name="bench-runner", role="runner"))
        session.flush()
        ids = dict(session.execute(select(User.name, User.id)).all())
        runner = Runner(user_id=ids["bench-runner"], name="bench", device_kinds=["cpu"], devices=[])
        session.add(runner)
        problem_ids = dict(
            session.execute(select(Problem.slug, Problem.id).where(Problem.slug.in_(PROBLEMS), Problem.current)).all()
        )
        session.add(
            SolutionBlob(
                hash="b" * 64,
                name="sol",
                language="pytorch",
                manifest={"language": "pytorch", "entry_point": "sol.py:solve"},
                sources={"sol.py": "def solve(x):\n    return x\n"},
                size=30,
            )
        )
        start, end = now - span - dt.timedelta(hours=1), now + dt.timedelta(hours=2)
        config = {
            "slug": CONTEST,
            "title": "Bench cup",
            "description": "",
            "start": start.isoformat() + "Z",
            "end": end.isoformat() + "Z",
            "problems": PROBLEMS,
            "device_kinds": ["cpu"],
            "freeze_hours": 3.0,
            "rule": {"name": "fastest"},
        }
        contest = ContestRow(
            slug=CONTEST, title="Bench cup", config=config, start=start, end=end, teams=False, created_by=ids["olga"]
        )
        session.add(contest)
        session.flush()
        session.add(ContestOrganizer(contest_id=contest.id, user_id=ids["olga"]))
        runner_id, contest_id = runner.id, contest.id
        if hasattr(ContestRow, "freeze_at"):
            contest.freeze_at = end - dt.timedelta(hours=3)
    freeze_at = end - dt.timedelta(hours=3)
    batch: list[dict] = []
    for i in range(stored):
        user = 0 if rng.random() < HEAVY_SHARE else rng.randrange(USERS)
        problem = PROBLEMS[rng.randrange(len(PROBLEMS))]
        passed = rng.random() < 0.9
        score = rng.lognormvariate(0, 0.5) if passed else None
        at = now - span + dt.timedelta(seconds=2 * i)
        batch.append(
            dict(
                user_id=ids[f"user{user}"],
                problem_id=problem_ids[problem],
                problem=problem,
                solution_hash="b" * 64,
                device_kind="cpu",
                mode="ranked",
                status="PASSED" if passed else "WRONG_VALUES",
                reason="" if passed else "values differ",
                score=score,
                created_at=at,
                finished_at=at + dt.timedelta(seconds=1),
                entered=rng.random() < CONTEST_SHARE,
            )
        )
        if len(batch) == 5000 or i == stored - 1:
            _write(db, batch, runner_id, contest_id, end, freeze_at)
            batch = []
    from gpuarena.service import leaderboard

    with db.write() as session:
        if hasattr(leaderboard, "rebuild"):
            leaderboard.rebuild(session)
        else:  # the code before the precomputed rows: the best per user only
            session.execute(
                text(
                    "INSERT INTO leaderboard_entries (problem_id, device_kind, user_id, submission_id, score, achieved_at) "
                    "SELECT problem_id, device_kind, user_id, id, score, finished_at FROM ("
                    " SELECT *, row_number() OVER (PARTITION BY problem_id, device_kind, user_id"
                    "  ORDER BY score DESC, finished_at) AS r FROM submissions"
                    " WHERE status = 'PASSED' AND mode = 'ranked') WHERE r = 1"
                )
            )
        if hasattr(ContestRow, "entries_count"):
            session.execute(
                text(
                    "UPDATE contests SET entries_count = "
                    "(SELECT count(*) FROM contest_entries WHERE contest_entries.contest_id = contests.id)"
                )
            )
        session.execute(text("ANALYZE"))
    return ids


def _write(db: Database, batch: list[dict], runner_id: int, contest_id: int, end: dt.datetime, freeze_at) -> None:
    held = hasattr(Submission, "held_until")
    with db.write() as session:
        first = (session.scalar(select(Submission.id).order_by(Submission.id.desc()).limit(1)) or 0) + 1
        rows = []
        for row in batch:
            values = {k: v for k, v in row.items() if k not in ("problem", "entered")}
            if held:
                values["held_until"] = end if row["entered"] and row["created_at"] >= freeze_at else None
            rows.append(values)
        session.execute(insert(Submission), [{"id": first + k, **r} for k, r in enumerate(rows)])
        session.execute(
            insert(Job),
            [
                dict(
                    id=first + k,
                    submission_id=first + k,
                    device_kind="cpu",
                    state="done",
                    attempts=1,
                    runner_id=runner_id,
                    queued_at=r["created_at"],
                    claimed_at=r["created_at"],
                    finished_at=r["finished_at"],
                )
                for k, r in enumerate(batch)
            ],
        )
        session.execute(
            insert(Result),
            [
                dict(
                    job_id=first + k,
                    submission_id=first + k,
                    runner_id=runner_id,
                    status=r["status"],
                    score=r["score"],
                    evaluation=evaluation(r["problem"], r["score"], r["status"]),
                    created_at=r["finished_at"],
                )
                for k, r in enumerate(batch)
            ],
        )
        entries = [
            dict(
                submission_id=first + k,
                contest_id=contest_id,
                user_id=r["user_id"],
                contestant=f"u{r['user_id']}",
                submitted_at=r["created_at"],
                score_low=r["score"] * 0.97 if r["score"] else None,
                score_high=r["score"] * 1.03 if r["score"] else None,
                max_abs_error=1e-6,
                max_rel_error=1e-6,
                review="pending",
                review_comment="",
                bonus=[],
                merged_upstream=False,
                samples_accepted=0,
                samples_score=0.0,
                updated_at=r["finished_at"],
            )
            for k, r in enumerate(batch)
            if r["entered"]
        ]
        if entries:
            session.execute(insert(ContestEntry), entries)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def measure(stored: int, views: int, workdir: Path) -> dict[str, dict[str, float]]:
    from fastapi.testclient import TestClient

    url = f"sqlite:///{workdir / f'pages-{stored}.db'}"
    upgrade(url)
    settings = Settings(
        home=workdir / f"home-{stored}",
        database_url=url,
        bundled_problems=True,
        submit_limit_per_minute=0,
        max_in_flight=0,
    )
    db = Database(url)
    sync_problems(db, settings.all_problem_roots())
    began = time.perf_counter()
    fill(db, stored)
    filled = time.perf_counter() - began
    client = TestClient(create_app(settings, db), raise_server_exceptions=True)
    pages = {
        "problem": "/problems/level1/softmax",
        "leaderboard (API)": "/api/leaderboard?problem=level1/softmax&device_kind=cpu",
        "leaderboard (CSV)": "/leaderboard.csv?problem=level1/softmax&device_kind=cpu",
        "user (100 listed)": "/users/user0",
        "user (N/200 listed)": "/users/user7",
        "contest": f"/contests/{CONTEST}",
        "home": "/",
    }
    out: dict[str, dict[str, float]] = {}
    for name, path in pages.items():
        for _ in range(5):  # warm: templates compiled, caches filled, the contest's entries kept
            assert client.get(path).status_code == 200, path
        walls, cpus = [], []
        for _ in range(views):
            cpu, wall = time.process_time(), time.perf_counter()
            answer = client.get(path)
            walls.append((time.perf_counter() - wall) * 1000)
            cpus.append((time.process_time() - cpu) * 1000)
            assert answer.status_code == 200, path
        out[name] = {
            "p50_ms": statistics.median(walls),
            "p99_ms": percentile(walls, 99),
            "cpu_ms": statistics.mean(cpus),
        }
        print(
            f"  {stored:>7} {name:<18} p50 {out[name]['p50_ms']:7.2f} ms  p99 {out[name]['p99_ms']:7.2f} ms  "
            f"cpu {out[name]['cpu_ms']:7.2f} ms",
            flush=True,
        )
    out["_fill"] = {"seconds": filled}
    client.close()
    db.dispose()
    return out


def report(results: dict[int, dict[str, dict[str, float]]], command: str, views: int) -> str:
    pages = [p for p in next(iter(results.values())) if not p.startswith("_")]
    sizes = sorted(results)
    lines = [
        f"# Page cost by stored submissions ({dt.date.today().isoformat()})",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores ({platform.processor() or platform.machine()}), "
        f"Python {platform.python_version()}, SQLite {__import__('sqlite3').sqlite_version}; "
        f"{views} anonymous views a page after 5 to warm up, through the app in process (fastapi TestClient).",
        "",
        f"{USERS} users, {len(PROBLEMS)} problems on one device kind, {CONTEST_SHARE:.0%} of the submissions "
        "entered in a contest whose freeze began an hour ago; user0 made 10% of them (their page lists its "
        "full 100 at every N), user7 about 1/200 (their page lists more as N grows, up to 100). Wall time "
        "per view, median and 99th percentile, and process CPU per view (ms).",
        "",
        "| page | " + " | ".join(f"{n:,} p50 / p99 / cpu" for n in sizes) + " |",
        "| --- | " + " | ".join("---" for _ in sizes) + " |",
    ]
    for page in pages:
        cells = [
            f"{results[n][page]['p50_ms']:.1f} / {results[n][page]['p99_ms']:.1f} / {results[n][page]['cpu_ms']:.1f}"
            for n in sizes
        ]
        lines.append(f"| {page} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Fill time (bulk insert and rebuild): "
        + ", ".join(f"{n:,}: {results[n]['_fill']['seconds']:.1f} s" for n in sizes),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--views", type=int, default=100)
    parser.add_argument("--out", type=Path, help="write the Markdown table here")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    results = {}
    with tempfile.TemporaryDirectory(prefix="page-cost-") as tmp:
        for n in args.sizes:
            results[n] = measure(n, args.views, Path(tmp))
    command = ".venv/bin/python bench/page_cost.py " + shlex.join(sys.argv[1:])
    text_out = report(results, command.strip(), args.views)
    print(text_out)
    if args.out:
        args.out.write_text(text_out)


if __name__ == "__main__":
    main()
