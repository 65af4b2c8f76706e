#!/usr/bin/env python3
"""Leaderboard reads while a contest runs (issue 20): GET /api/leaderboard latency against a real
`gpuarena serve` process (one uvicorn worker, no runner, SQLite) holding 100,000 stored
submissions (bench/service.py's seed) and a running contest of --contestants x --problems
(bench/contest_standings_service.py's fill, 10,000 x 50 = 550,000 entries), measured

  - quiet: nothing else happening;
  - during the contest: meanwhile one process lands a result or review every --change-every
    seconds (an entry's figures and updated_at rewritten, as the runner's and the review's
    transactions do) and one client reads the contest's standings (GET /api/contests/bench/
    standings) in a loop, so that the server recomputes them after every change.

    python3 bench/contest_leaderboard_reads.py [--stored 100000] [--contestants 10000] [--problems 50]
        [--seconds 15] [--clients 1,8] [--change-every 0.5] [--out bench/results/contest-leaderboard-reads-cpu-vm.json]

The service's target (bench/results/service.md): leaderboard read p99 <= 50 ms at 100k submissions.
The server's first standings read (every entry loaded) is made before the clock starts.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from contest_standings_service import fill  # noqa: E402
from sqlalchemy import update  # noqa: E402

from gpuarena.service.db import Database  # noqa: E402
from gpuarena.service.tables import ContestEntry, utcnow  # noqa: E402
from service import PROBLEM, LeanClient, hammer, percentile, seed, start_server  # noqa: E402


def _changes(url: str, every: float, stop, counter) -> None:
    """Results and reviews landing: one entry rewritten every `every` seconds."""
    db = Database(url)
    i = 0
    while not stop.is_set():
        i += 1
        with db.write() as session:
            session.execute(
                update(ContestEntry)
                .where(ContestEntry.submission_id == i)
                .values(review=("accepted", "rejected")[i % 2], score_low=0.5, updated_at=utcnow())
            )
        counter.value += 1
        stop.wait(every)
    db.dispose()


def _standings_reader(base: str, stop, results) -> None:
    """A contestant's page polling the standings, flat out."""
    latencies = []
    with LeanClient(base) as http:
        while not stop.is_set():
            began = time.perf_counter()
            answer = http.get("/api/contests/bench/standings")
            if answer.status_code == 200:
                latencies.append(time.perf_counter() - began)
    results.put(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--contestants", type=int, default=10_000)
    parser.add_argument("--problems", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--change-every", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="gpuarena-bench-contest-"))
    url = f"sqlite:///{workdir / 'bench.db'}"
    from gpuarena.service.migrate import upgrade

    upgrade(url)
    t0 = time.perf_counter()
    db = Database(url)
    start = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(days=2)  # running: 2 days in, 1 to go
    fill(db, args.contestants, args.problems, {"name": "fastest"}, 0, start=start, hours=47)
    db.dispose()
    seed(url, args.stored, args.users)
    print(f"filled in {time.perf_counter() - t0:.0f} s", flush=True)
    process, base = start_server(url, workdir)
    record: dict = {
        "command": "python3 " + " ".join(shlex.quote(a) for a in [os.path.relpath(__file__, ROOT), *sys.argv[1:]]),
        "date": dt.date.today().isoformat(),
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "database": "sqlite",
        "stored_submissions": args.stored,
        "contestants": args.contestants,
        "problems": args.problems,
        "change_every_s": args.change_every,
        "target": "leaderboard read p99 <= 50 ms at 100k submissions (bench/results/service.md)",
    }
    try:
        with LeanClient(base) as http:
            began = time.perf_counter()
            assert http.get("/api/contests/bench/standings").status_code == 200
            record["first_standings_read_s"] = round(time.perf_counter() - began, 2)
        print(f"first standings read {record['first_standings_read_s']} s", flush=True)

        def read(http, w, i):
            return http.get("/api/leaderboard", params={"problem": PROBLEM, "device_kind": "cpu"})

        hammer(base, 2, 2, read, process.pid)  # warm up
        phases = []
        for clients in [int(c) for c in args.clients.split(",")]:
            quiet = hammer(base, clients, args.seconds, read, process.pid)
            print(f"{clients} client(s), quiet: {quiet}", flush=True)
            context = multiprocessing.get_context("fork")
            stop, results, counter = context.Event(), context.Queue(), context.Value("i", 0)
            writer = context.Process(target=_changes, args=(url, args.change_every, stop, counter), daemon=True)
            reader = context.Process(target=_standings_reader, args=(base, stop, results), daemon=True)
            writer.start()
            reader.start()
            time.sleep(1)
            during = hammer(base, clients, args.seconds, read, process.pid)
            stop.set()
            standings = results.get(timeout=120)
            writer.join(timeout=30)
            reader.join(timeout=120)
            during["standings_reads"] = len(standings)
            during["standings_read_p50_ms"] = round(1000 * percentile(standings, 50), 1)
            during["standings_read_max_ms"] = round(1000 * max(standings, default=float("nan")), 1)
            during["changes_landed"] = counter.value
            print(f"{clients} client(s), during the contest: {during}", flush=True)
            phases.append(
                {
                    "clients": clients,
                    "quiet": quiet,
                    "during_contest": during,
                    "p99_within_target_during_contest": during["p99_ms"] <= 50,
                }
            )
        record["phases"] = phases
        record["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        process.terminate()
        process.wait(timeout=30)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
