#!/usr/bin/env python3
"""Service throughput and latency, against a real `gpuarena serve` process (one uvicorn
worker, no embedded runner) over SQLite and PostgreSQL, with 100,000 stored submissions
(each with its finished job and result, spread over 2,000 users and their leaderboard entries).

Measures, as issue 4 asks:
  - leaderboard reads (GET /api/leaderboard, 100 rows): from 1 client (latency) and from
    --clients client processes at once (reads per second, p50/p99);
  - submissions accepted per second (--clients processes POSTing /api/submissions, each its
    own user, rate limit off);
  - queued-to-claimed latency: an idle runner long-polls /api/runner/claim while jobs are
    submitted one at a time; the gap is the job's claimed_at - queued_at (server clock);
  - the server's CPU time per request (from /proc), which other work on the machine disturbs
    far less than latencies.

    python3 bench/service.py [--databases sqlite,postgresql] [--stored 100000] [--seconds 10]
                             [--clients 8] [--out bench/results] [--note TEXT]

The stream-flood scenario (issue 46, item 7) measures leaderboard reads alone, then with
--streams anonymous live event streams (GET /api/submissions/ID/events) open on queued
submissions, the server's per-client stream cap lifted (all streams come from one address):

    python3 bench/service.py --scenario stream-flood --streams 120 [--databases ...] [--stored ...]

It writes service-stream-flood.json and .md instead of service.json and .md.

PostgreSQL comes from scripts/postgres.sh (a throwaway cluster with fsync on, port 55433).
Load generator and server share the machine, as they would on a 2-core box.
"""

# The scenarios and their reports. The database and its seeding are service_seed.py's; the
# server, the load generator and the live event streams are service_load.py's.

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
import threading
import time
from pathlib import Path

import httpx
from sqlalchemy import select, update

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from service_load import LeanClient, cpu_seconds, free_port, hammer, open_streams, percentile, start_server  # noqa: E402
from service_seed import EVALUATION, PROBLEM, SOURCE, fresh_database, seed  # noqa: E402

from gpuarena.service.db import Database  # noqa: E402
from gpuarena.service.tables import Job  # noqa: E402

# what other bench scripts import from here (contest_leaderboard_reads.py)
__all__ = [
    "EVALUATION",
    "PROBLEM",
    "SOURCE",
    "LeanClient",
    "cpu_seconds",
    "free_port",
    "fresh_database",
    "hammer",
    "open_streams",
    "percentile",
    "seed",
    "start_server",
]


def queued_to_claimed(base: str, seeded: dict, url: str, jobs: int) -> dict:
    runner_headers = {"Authorization": f"Bearer {seeded['tokens']['runner']}"}
    user_headers = {"Authorization": f"Bearer {seeded['tokens']['user0']}"}
    claimed: list[int] = []
    ready = threading.Event()

    def idle_runner() -> None:
        with httpx.Client(base_url=base, headers=runner_headers, timeout=60) as http:
            while len(claimed) < jobs:
                ready.set()
                answer = http.post(
                    "/api/runner/claim", json={"runner_id": seeded["runner_id"], "device_kinds": ["cpu"], "wait_s": 10}
                )
                if answer.status_code == 200:
                    claimed.append(answer.json()["job_id"])

    db = Database(url)
    with db.write() as session:  # earlier phases left jobs queued: drop them, so the runner is idle
        session.execute(update(Job).where(Job.state == "queued").values(state="failed", last_error="bench: dropped"))
    thread = threading.Thread(target=idle_runner, daemon=True)
    thread.start()
    body = {
        "problem": PROBLEM,
        "device_kind": "cpu",
        "mode": "test",
        "solution": {
            "name": "s",
            "manifest": {"language": "pytorch", "entry_point": "s.py:solve"},
            "sources": {"s.py": SOURCE},
        },
    }
    with httpx.Client(base_url=base, headers=user_headers, timeout=60) as http:
        for i in range(jobs):
            ready.wait()
            time.sleep(random.uniform(0.05, 0.3))  # the runner is idle, mid long-poll
            before = len(claimed)
            assert http.post("/api/submissions", json=body).status_code == 201
            waited = time.monotonic() + 30
            while len(claimed) == before:
                if time.monotonic() > waited:
                    raise RuntimeError(f"job {i} was not claimed within 30 s")
                time.sleep(0.005)
    thread.join(timeout=30)
    with db.read() as session:
        gaps = [
            (c - q).total_seconds()
            for q, c in session.execute(select(Job.queued_at, Job.claimed_at).where(Job.id.in_(claimed)))
        ]
    db.dispose()
    return {
        "jobs": len(gaps),
        "p50_ms": round(1000 * percentile(gaps, 50), 1),
        "p99_ms": round(1000 * percentile(gaps, 99), 1),
        "max_ms": round(1000 * max(gaps), 1),
    }


def bench(kind: str, args: argparse.Namespace) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix=f"gpuarena-bench-{kind}-"))
    url = fresh_database(kind, workdir)
    started = time.monotonic()
    seeded = seed(url, args.stored, args.users)
    print(f"[{kind}] seeded {args.stored} submissions in {time.monotonic() - started:.0f} s", flush=True)
    process, base = start_server(url, workdir)
    try:
        tokens = [seeded["tokens"][f"user{i}"] for i in range(args.clients)]
        body = {
            "problem": PROBLEM,
            "device_kind": "cpu",
            "mode": "ranked",
            "solution": {
                "name": "s",
                "manifest": {"language": "pytorch", "entry_point": "s.py:solve"},
                "sources": {"s.py": SOURCE},
            },
        }

        def read(http, w, i):
            return http.get("/api/leaderboard", params={"problem": PROBLEM, "device_kind": "cpu"})

        hammer(base, 2, 2, read, process.pid)  # warm up: connections, statement caches
        board_one = hammer(base, 1, args.seconds, read, process.pid)
        print(f"[{kind}] leaderboard reads, 1 client {board_one}", flush=True)
        board = hammer(base, args.clients, args.seconds, read, process.pid)
        print(f"[{kind}] leaderboard reads, {args.clients} clients {board}", flush=True)
        submits = hammer(
            base,
            args.clients,
            args.seconds,
            lambda http, w, i: http.post(
                "/api/submissions",
                json={**body, "solution": {**body["solution"], "sources": {"s.py": SOURCE + f"# {w}-{i}\n"}}},
                headers={"Authorization": f"Bearer {tokens[w]}"},
            ),
            process.pid,
        )
        print(f"[{kind}] submissions, {args.clients} clients {submits}", flush=True)
        claims = queued_to_claimed(base, seeded, url, args.jobs)
        print(f"[{kind}] queued-to-claimed {claims}", flush=True)
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "database": kind,
        "stored_submissions": args.stored,
        "users": args.users,
        "clients": args.clients,
        "leaderboard_reads_1_client": board_one,
        "leaderboard_reads": board,
        "submissions": submits,
        "queued_to_claimed": claims,
        "targets_met": {
            "leaderboard_read_p99_le_50ms": board["p99_ms"] <= 50,
            "leaderboard_read_p99_le_50ms_1_client": board_one["p99_ms"] <= 50,
            "submissions_per_second_ge_100": submits["per_second"] >= 100,
            "queued_to_claimed_p99_le_1s": claims["p99_ms"] <= 1000,
        },
    }


def flood_bench(kind: str, args: argparse.Namespace) -> dict:
    """Leaderboard reads without, then with, args.streams live event streams open."""
    workdir = Path(tempfile.mkdtemp(prefix=f"gpuarena-bench-flood-{kind}-"))
    url = fresh_database(kind, workdir)
    seeded = seed(url, args.stored, args.users)
    # every stream from this one address: lift the per-client cap (the total cap stays 500)
    process, base = start_server(url, workdir, GPUARENA_STREAMS_PER_CLIENT="0")
    try:
        body = {
            "problem": PROBLEM,
            "device_kind": "cpu",
            "mode": "ranked",
            "solution": {
                "name": "s",
                "manifest": {"language": "pytorch", "entry_point": "s.py:solve"},
                "sources": {"s.py": SOURCE},
            },
        }
        queued = []
        with httpx.Client(base_url=base, timeout=60) as http:  # waiting jobs: their streams poll queue positions
            for i in range(4):
                headers = {"Authorization": f"Bearer {seeded['tokens'][f'user{i}']}"}
                answer = http.post("/api/submissions", json=body, headers=headers)
                assert answer.status_code == 201, answer.text
                queued.append(answer.json()["id"])

        def read(http, w, i):
            return http.get("/api/leaderboard", params={"problem": PROBLEM, "device_kind": "cpu"})

        hammer(base, 2, 2, read, process.pid)  # warm up
        quiet_one = hammer(base, 1, args.seconds, read, process.pid)
        quiet = hammer(base, args.clients, args.seconds, read, process.pid)
        print(f"[{kind}] leaderboard reads, no streams: 1 client {quiet_one}; {args.clients} clients {quiet}")
        cpu_before, idle_began = cpu_seconds(process.pid), time.monotonic()
        stop, threads = open_streams(base, queued, args.streams)
        time.sleep(args.seconds)  # the streams alone: what they cost the server while nobody reads
        idle_cpu = (cpu_seconds(process.pid) - cpu_before) / (time.monotonic() - idle_began)
        flooded_one = hammer(base, 1, args.seconds, read, process.pid)
        flooded = hammer(base, args.clients, args.seconds, read, process.pid)
        print(
            f"[{kind}] leaderboard reads, {args.streams} streams open: 1 client {flooded_one}; "
            f"{args.clients} clients {flooded}; streams alone {idle_cpu:.3f} CPU s/s"
        )
        stop.set()
    finally:
        process.terminate()
        process.wait(timeout=30)
    return {
        "database": kind,
        "stored_submissions": args.stored,
        "streams": args.streams,
        "clients": args.clients,
        "leaderboard_reads_1_client_no_streams": quiet_one,
        "leaderboard_reads_no_streams": quiet,
        "leaderboard_reads_1_client_with_streams": flooded_one,
        "leaderboard_reads_with_streams": flooded,
        "server_cpu_seconds_per_second_streams_alone": round(idle_cpu, 4),
    }


def flood_main(args: argparse.Namespace, machine: dict) -> None:
    results = {
        "machine": machine,
        "command": shlex.join(["python3", "bench/service.py", *sys.argv[1:]]),
        "runs": [flood_bench(kind, args) for kind in args.databases.split(",")],
    }
    machine["finished_utc"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service-stream-flood.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"# Leaderboard reads under a flood of live event streams ({machine['started_utc']})",
        "",
        f"Command: `{results['command']}`",
        "",
        f"Machine: {machine['cpus']} cores ({machine['cpu']}), load average at start "
        f"{machine['load_average_at_start']}; one `gpuarena serve --no-runner` process, the streams and the "
        "readers on the same cores. " + (machine["note"] or ""),
        "",
        "Before issue 46 (item 7), 120 anonymous streams took the leaderboard's p99 from 15 ms to 1.3-2.7 s: each "
        "stream read its submission's detail (queue position included) four times a second. Now one poller reads "
        "once per 0.5 s for all of them.",
        "",
        "| database | stored | streams | read p99, 1 client | with streams | read p99, N clients | with streams | "
        "reads/s | with streams | server CPU, streams alone |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["runs"]:
        q1, q = r["leaderboard_reads_1_client_no_streams"], r["leaderboard_reads_no_streams"]
        f1, f = r["leaderboard_reads_1_client_with_streams"], r["leaderboard_reads_with_streams"]
        lines.append(
            f"| {r['database']} | {r['stored_submissions']:,} | {r['streams']} | {q1['p99_ms']} ms | {f1['p99_ms']} ms "
            f"| {q['p99_ms']} ms ({r['clients']}) | {f['p99_ms']} ms | {q['per_second']} | {f['per_second']} | "
            f"{100 * r['server_cpu_seconds_per_second_streams_alone']:.1f}% of a core |"
        )
    (args.out / "service-stream-flood.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--databases", default="sqlite,postgresql")
    parser.add_argument("--stored", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--note", default="", help="What else ran on the machine meanwhile, for the record")
    parser.add_argument("--scenario", choices=["all", "stream-flood"], default="all")
    parser.add_argument("--streams", type=int, default=120, help="stream-flood: live event streams held open")
    args = parser.parse_args()
    machine = {
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "started_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "note": args.note,
    }
    if args.scenario == "stream-flood":
        flood_main(args, machine)
        return
    results = {
        "machine": machine,
        "command": shlex.join(["python3", "bench/service.py", *sys.argv[1:]]),
        "targets": {"leaderboard_read_p99_ms": 50, "submissions_per_second": 100, "queued_to_claimed_p99_ms": 1000},
        "runs": [bench(kind, args) for kind in args.databases.split(",")],
    }
    machine["finished_utc"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "service.json").write_text(json.dumps(results, indent=2) + "\n")
    lines = [
        f"# Service benchmark ({machine['started_utc']})",
        "",
        f"Command: `{results['command']}`",
        "",
        f"Machine: {machine['cpus']} cores ({machine['cpu']}), {machine['platform']}, Python {machine['python']}; "
        f"load average at start {machine['load_average_at_start']}. One `gpuarena serve --no-runner` process "
        f"(one uvicorn worker); the load generator (Python processes, http.client, keep-alive) runs on the same cores. "
        + (machine["note"] + " " if machine["note"] else "")
        + "",
        "",
        "Targets: leaderboard read p99 <= 50 ms at 100k submissions; >= 100 submissions/s accepted; "
        "queued-to-claimed p99 <= 1 s.",
        "",
        "| database | stored | clients | leaderboard reads/s | read p50 | read p99 | read p99, 1 client | "
        "server CPU/read | submissions/s | submit p99 | server CPU/submit | queued→claimed p50 | p99 | "
        "load average |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results["runs"]:
        one, b, s, q = r["leaderboard_reads_1_client"], r["leaderboard_reads"], r["submissions"], r["queued_to_claimed"]
        lines.append(
            f"| {r['database']} | {r['stored_submissions']:,} | {r['clients']} | {b['per_second']} | "
            f"{b['p50_ms']} ms | {b['p99_ms']} ms | {one['p99_ms']} ms | {b['server_cpu_ms_per_request']} ms | "
            f"{s['per_second']} | {s['p99_ms']} ms | {s['server_cpu_ms_per_request']} ms | "
            f"{q['p50_ms']} ms | {q['p99_ms']} ms | {b['load_average_1min_after']} |"
        )
    (args.out / "service.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
