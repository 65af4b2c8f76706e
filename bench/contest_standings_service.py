#!/usr/bin/env python3
"""How long a contest's standings read takes in the service, as GET /api/contests/SLUG/standings
does it: in a fresh process (every entry read and built), after one entry changed (the changed
entries reread, the rule run again) and when nothing changed (one indexed query).

    python3 bench/contest_standings_service.py [--contestants 2000] [--problems 20] [--repeat 3]
                                               [--out bench/results/contest-standings-service-cpu-vm.json]

A fresh SQLite database in a temporary folder, migrated; problems, users, submissions and
contest entries inserted in bulk (every contestant passes every problem once, ranked, with an
interval; one in ten gets a second, flagged or not). Figures are the best of --repeat reads.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import shlex
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from sqlalchemy import insert, update  # noqa: E402

from gpuarena.service import contest_standings, contests  # noqa: E402
from gpuarena.service.db import Database  # noqa: E402
from gpuarena.service.migrate import upgrade  # noqa: E402
from gpuarena.service.tables import ContestEntry, ContestRow, Problem, SolutionBlob, Submission, User, utcnow  # noqa: E402

START = dt.datetime(2026, 12, 1)


def fill(
    db: Database,
    contestants: int,
    problems: int,
    rule: dict,
    seed: int,
    start: dt.datetime = START,
    hours: float = 60.0,
) -> None:
    """A contest 'bench' of three days from start, its entries in its first `hours`."""
    START = start
    rng = random.Random(seed)
    slugs = [f"level{p % 4 + 1}/op{p:02d}" for p in range(problems)]
    with db.write() as session:
        session.execute(
            insert(User), [{"id": i + 1, "name": f"c{i:05d}", "role": "participant"} for i in range(contestants)]
        )
        session.execute(
            insert(Problem),
            [
                {
                    "id": p + 1,
                    "slug": s,
                    "version": 1,
                    "current": True,
                    "content_hash": "0" * 64,
                    "name": s,
                    "level": p % 4 + 1,
                    "weight": 1.0,
                    "summary": "",
                    "spec": {"workloads": []},
                    "files": {},
                    "secret_seed": 0,
                }
                for p, s in enumerate(slugs)
            ],
        )
        session.execute(
            insert(SolutionBlob),
            [
                {
                    "hash": "0" * 64,
                    "name": "s",
                    "language": "pytorch",
                    "manifest": {},
                    "sources": {"s.py": ""},
                    "size": 0,
                }
            ],
        )
        spec = {
            "slug": "bench",
            "title": "bench",
            "start": START.isoformat() + "Z",
            "end": (START + dt.timedelta(days=3)).isoformat() + "Z",
            "problems": slugs,
            "device_kinds": ["H100"],
            "rule": rule,
        }
        session.execute(
            insert(ContestRow),
            [
                {
                    "id": 1,
                    "slug": "bench",
                    "title": "bench",
                    "config": spec,
                    "start": START,
                    "end": START + dt.timedelta(days=3),
                    "teams": False,
                    "created_by": 1,
                    "description": "",
                }
            ],
        )
        submissions, entries = [], []
        for c in range(contestants):
            skill = rng.lognormvariate(0, 0.5)
            for p in range(problems):
                score = skill * rng.lognormvariate(0, 0.4)
                at = START + dt.timedelta(hours=rng.uniform(0, hours))
                for again in range(2 if rng.random() < 0.1 else 1):
                    sid = len(submissions) + 1
                    s = score * (1.2 if again and rng.random() < 0.5 else 1.0)
                    submissions.append(
                        {
                            "id": sid,
                            "user_id": c + 1,
                            "problem_id": p + 1,
                            "solution_hash": "0" * 64,
                            "device_kind": "H100",
                            "mode": "ranked",
                            "status": "PASSED",
                            "score": s,
                            "created_at": at,
                            "reason": "",
                        }
                    )
                    entries.append(
                        {
                            "submission_id": sid,
                            "contest_id": 1,
                            "user_id": c + 1,
                            "contestant": f"c{c:05d}",
                            "submitted_at": at + dt.timedelta(hours=again),
                            "score_low": s * 0.98,
                            "score_high": s * 1.02,
                            "max_abs_error": 1e-4,
                            "max_rel_error": 1e-4,
                            "review": rng.choice(("accepted", "pending")),
                            "review_comment": "",
                            "merged_upstream": False,
                            "bonus": [],
                            "samples_accepted": 0,
                            "samples_score": 0.0,
                            "updated_at": at - dt.timedelta(days=60),
                        }
                    )
        session.execute(insert(Submission), submissions)
        session.execute(insert(ContestEntry), entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contestants", type=int, default=2000)
    parser.add_argument("--problems", type=int, default=20)
    parser.add_argument("--rule", default="fastest")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        upgrade(url)
        db = Database(url)
        t0 = time.perf_counter()
        fill(db, args.contestants, args.problems, {"name": args.rule}, args.seed)
        fill_s = time.perf_counter() - t0
        cold, changed, unchanged = float("inf"), float("inf"), float("inf")

        def read() -> float:
            t0 = time.perf_counter()
            with db.read() as session:
                nonlocal shown
                shown = contest_standings.standings(session, contests.get(session, "bench"), None)
            return time.perf_counter() - t0

        shown = None
        for i in range(args.repeat):
            contest_standings._kept.clear()  # a fresh server process: every entry read
            cold = min(cold, read())
            with db.write() as session:  # a review arrives: one entry changes
                session.execute(
                    update(ContestEntry)
                    .where(ContestEntry.submission_id == i + 1)
                    .values(review="rejected", updated_at=utcnow())
                )
            changed = min(changed, read())
            unchanged = min(unchanged, read())
        db.dispose()
    print(
        f"{args.contestants:,} contestants x {args.problems} problems ({args.rule}): filled in {fill_s:.1f} s, "
        f"standings: {cold:.3f} s in a fresh process, {changed:.3f} s after a change, {unchanged:.4f} s unchanged "
        f"({len(shown.standings.rows):,} rows)"
    )
    if args.out:
        record = {
            "command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO), *sys.argv[1:]]),
            "date": dt.date.today().isoformat(),
            "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "load_average": os.getloadavg()},
            "contestants": args.contestants,
            "problems": args.problems,
            "rule": args.rule,
            "fresh_process_s": round(cold, 3),
            "after_a_change_s": round(changed, 3),
            "unchanged_s": round(unchanged, 4),
            "rows": len(shown.standings.rows),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
