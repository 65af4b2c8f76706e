#!/usr/bin/env python3
"""How long a contest's standings read takes in the service: the entries' query, building the
rules' records, the rule, per-problem best, as GET /api/contests/SLUG/standings does it after
a change (recomputed), and when nothing changed since the last read (kept, one stamp query).

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

from sqlalchemy import insert  # noqa: E402

from gpuarena.service import contests  # noqa: E402
from gpuarena.service.db import Database  # noqa: E402
from gpuarena.service.migrate import upgrade  # noqa: E402
from gpuarena.service.tables import (ContestEntry, ContestRow, Problem, SolutionBlob, Submission,  # noqa: E402
                                     User)

START = dt.datetime(2026, 12, 1)


def fill(db: Database, contestants: int, problems: int, rule: dict, seed: int) -> None:
    rng = random.Random(seed)
    slugs = [f"level{p % 4 + 1}/op{p:02d}" for p in range(problems)]
    with db.write() as session:
        session.execute(insert(User), [{"id": i + 1, "name": f"c{i:05d}", "role": "participant"}
                                       for i in range(contestants)])
        session.execute(insert(Problem), [
            {"id": p + 1, "slug": s, "version": 1, "current": True, "content_hash": "0" * 64, "name": s,
             "level": p % 4 + 1, "weight": 1.0, "summary": "", "spec": {"workloads": []}, "files": {},
             "secret_seed": 0} for p, s in enumerate(slugs)])
        session.execute(insert(SolutionBlob), [{"hash": "0" * 64, "name": "s", "language": "pytorch", "manifest": {},
                                                "sources": {"s.py": ""}, "size": 0}])
        spec = {"slug": "bench", "title": "bench", "start": START.isoformat() + "Z",
                "end": (START + dt.timedelta(days=3)).isoformat() + "Z", "problems": slugs, "device_kinds": ["H100"],
                "rule": rule}
        session.execute(insert(ContestRow), [{"id": 1, "slug": "bench", "title": "bench", "config": spec,
                                              "start": START, "end": START + dt.timedelta(days=3), "teams": False,
                                              "created_by": 1, "description": ""}])
        submissions, entries = [], []
        for c in range(contestants):
            skill = rng.lognormvariate(0, 0.5)
            for p in range(problems):
                score = skill * rng.lognormvariate(0, 0.4)
                at = START + dt.timedelta(hours=rng.uniform(0, 60))
                for again in range(2 if rng.random() < 0.1 else 1):
                    sid = len(submissions) + 1
                    s = score * (1.2 if again and rng.random() < 0.5 else 1.0)
                    submissions.append({"id": sid, "user_id": c + 1, "problem_id": p + 1, "solution_hash": "0" * 64,
                                        "device_kind": "H100", "mode": "ranked", "status": "PASSED", "score": s,
                                        "created_at": at, "reason": ""})
                    entries.append({"submission_id": sid, "contest_id": 1, "user_id": c + 1, "contestant": f"c{c:05d}",
                                    "submitted_at": at + dt.timedelta(hours=again), "score_low": s * 0.98,
                                    "score_high": s * 1.02, "max_abs_error": 1e-4, "max_rel_error": 1e-4,
                                    "review": rng.choice(("accepted", "pending")), "review_comment": "",
                                    "merged_upstream": False, "bonus": [], "samples_accepted": 0,
                                    "samples_score": 0.0})
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
        best, cached = float("inf"), float("inf")
        for _ in range(args.repeat):
            contests._cache.clear()  # a recomputation, as after a new result or review
            t0 = time.perf_counter()
            with db.read() as session:
                shown = contests.standings(session, contests.get(session, "bench"), None)
            best = min(best, time.perf_counter() - t0)
            t0 = time.perf_counter()
            with db.read() as session:  # nothing changed: the kept standings, after the stamp query
                contests.standings(session, contests.get(session, "bench"), None)
            cached = min(cached, time.perf_counter() - t0)
        db.dispose()
    print(f"{args.contestants:,} contestants x {args.problems} problems ({args.rule}): filled in {fill_s:.1f} s, "
          f"standings recomputed in {best:.3f} s, read unchanged in {cached:.3f} s ({len(shown.standings.rows):,} rows)")
    if args.out:
        record = {"command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, REPO),
                                                                            *sys.argv[1:]]),
                  "date": dt.date.today().isoformat(), "machine": {"platform": platform.platform(),
                                                                   "cpu_count": os.cpu_count(),
                                                                   "load_average": os.getloadavg()},
                  "contestants": args.contestants, "problems": args.problems, "rule": args.rule,
                  "standings_recomputed_s": round(best, 3), "standings_unchanged_s": round(cached, 4), "rows": len(shown.standings.rows)}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
