"""Fault test: PostgreSQL, 2 API servers and 4 runners on this machine; a few hundred jobs
while runners and API servers are killed with SIGKILL at random and restarted.

Every job must end exactly once with a result (0 lost, 0 duplicated) and the leaderboards
must equal what the evaluation rows say. The runners serve the CPU; the workload is the tiny
test problem `axpy_dest` (two workloads of 4K and 64K elements) in ranked mode with a short
timing budget, so a job costs a few seconds of CPU (mostly starting Python and torch).

    python bench/chaos.py                       # 200 jobs, 60 kills -> bench/results/chaos-<date>.json
    python bench/chaos.py --jobs 24 --kills 6   # a quick look

Clients: four users, each submitting with `gpuarena batch --server A,B` (idempotency keys,
fails over between the servers); runners get `--server A,B` (shuffled) and fail over too.
What it counts, from the database at the end:
  lost:       jobs asked for that have no submission, or whose submission has no result
              (including ERROR: attempts exhausted);
  duplicated: submissions beyond one per idempotency key, plus result rows beyond one per job;
  leaderboard_mismatches: (problem, device kind) boards whose entries differ from each user's
              best ranked, passing score recomputed from the results' Evaluation records, or
              whose API answer differs between the two servers.
"""

# The fault test itself: the fleet's processes are chaos_fleet.py's (re-exported here for
# job_latency.py and multi_gpu.py), the verdict is chaos_verify.py's.

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from chaos_fleet import CLI, ROOT, Proc, cli, free_port, machine, wait_healthy, wait_runners
from chaos_verify import verify

__all__ = ["CLI", "ROOT", "Proc", "cli", "free_port", "machine", "verify", "wait_healthy", "wait_runners"]

PROBLEMS = ROOT / "tests" / "fixtures" / "problems"
GOOD = (ROOT / "tests" / "fixtures" / "solutions" / "dest_good.py").read_text()
PLAIN = "def solve(a, x, b, y):\n    y.copy_(a * x + b)\n"
WRONG = (ROOT / "tests" / "fixtures" / "solutions" / "dest_skips_write.py").read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--kills", type=int, default=60, help="SIGKILLs to deliver (runners and API servers)")
    parser.add_argument("--interval", type=float, default=5.0, help="mean seconds between kills")
    parser.add_argument("--servers", type=int, default=2)
    parser.add_argument("--runners", type=int, default=4)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--lease", type=float, default=15.0, help="lease seconds (GPUARENA_LEASE_S)")
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=50,
        help="claims per job before it ends as ERROR (GPUARENA_MAX_ATTEMPTS; the service's default, 3, "
        "stops a job that keeps killing its runners: here the test kills them, so a job could "
        "run out of attempts through no fault of its own; the report gives the attempts seen)",
    )
    parser.add_argument("--server-share", type=float, default=0.35, help="share of kills aimed at API servers")
    parser.add_argument(
        "--serve",
        action="store_true",
        help="runners keep one job process serving their jobs one after another (`gpuarena runner --serve`, "
        "a GPU's default), so kills meet kept job processes too",
    )
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--out", type=Path, default=None, help="[default: bench/results/chaos-<date>.json]")
    parser.add_argument("--keep", action="store_true", help="keep the database and logs")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else secrets.randbits(32)
    rng = random.Random(seed)

    from sqlalchemy import create_engine, text

    from gpuarena.service.db import normalise_url

    base = (
        subprocess.run(["bash", str(ROOT / "scripts" / "postgres.sh")], capture_output=True, text=True, check=True)
        .stdout.strip()
        .splitlines()[-1]
    )
    dbname = "gpuarena_chaos_" + secrets.token_hex(4)
    admin = create_engine(normalise_url(base), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE DATABASE {dbname}"))
    url = base.rsplit("/", 1)[0] + "/" + dbname
    work = Path(tempfile.mkdtemp(prefix="gpuarena-chaos-"))
    logs = work / "logs"
    logs.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    env.update(
        GPUARENA_HOME=str(work / "home"),
        GPUARENA_CACHE=str(work / "cache"),
        GPUARENA_DATABASE_URL=url,
        GPUARENA_LEASE_S=str(args.lease),
        GPUARENA_SUBMIT_LIMIT="0",
        GPUARENA_MAX_IN_FLIGHT="0",
        GPUARENA_MAX_ATTEMPTS=str(args.max_attempts),
        XDG_CONFIG_HOME=str(work / "config"),
        PYTHONPATH=str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        GPUARENA_RUNNER_SERVE="1" if args.serve else "0",
    )
    procs: list[Proc] = []
    batches: list[subprocess.Popen] = []
    report: dict = {}
    try:
        cli(env, "db", "upgrade")
        users = [f"chaos-user-{i}" for i in range(args.users)]
        tokens = {u: cli(env, "users", "add", u).split()[-1] for u in users}
        fleet = cli(env, "users", "add", "chaos-fleet", "--role", "runner", "--device-kind", "cpu").split()[-1]
        ports = [free_port() for _ in range(args.servers)]
        servers = [
            Proc(
                f"server-{i}", [*CLI, "serve", "--no-runner", "--port", str(p), "--problems", str(PROBLEMS)], env, logs
            )
            for i, p in enumerate(ports)
        ]
        urls = [f"http://127.0.0.1:{p}" for p in ports]
        for s in servers:
            s.start()
        for u in urls:
            wait_healthy(u)
        runners = []
        for i in range(args.runners):
            order = urls[:]
            rng.shuffle(order)
            runners.append(
                Proc(
                    f"runner-{i}",
                    [
                        *CLI,
                        "runner",
                        "--name",
                        f"chaos-runner-{i}",
                        "--server",
                        ",".join(order),
                        "--token",
                        fleet,
                        "--devices",
                        "cpu",
                        "--budget",
                        "0.05",
                        "--health-interval",
                        "0",
                    ],
                    env,
                    logs,
                )
            )
        for r in runners:
            r.start()
        procs = servers + runners
        wait_runners(urls[0], args.runners)  # before any submission: "cpu" is a known kind once a runner says hello

        sols = work / "solutions"
        sols.mkdir()
        (sols / "good.py").write_text(GOOD)
        (sols / "plain.py").write_text(PLAIN)
        (sols / "wrong.py").write_text(WRONG)
        per_user = [args.jobs // args.users + (1 if i < args.jobs % args.users else 0) for i in range(args.users)]
        t0 = time.monotonic()
        started_at = dt.datetime.now(dt.UTC)
        for i, (user, n) in enumerate(zip(users, per_user)):
            # every user mostly passes (two kernels of different speed); one in ten is wrong
            names = [("wrong.py" if k % 10 == 9 else ("good.py" if (k + i) % 2 else "plain.py")) for k in range(n)]
            spec = work / f"batch-{i}.json"
            spec.write_text(
                json.dumps(
                    {
                        "problems": ["axpy_dest"],
                        "solutions": [f"solutions/{x}" for x in names],
                        "devices": ["cpu"],
                        "mode": "ranked",
                    }
                )
            )
            order = urls[i % len(urls) :] + urls[: i % len(urls)]
            with open(logs / f"batch-{i}.log", "w") as log:
                batches.append(
                    subprocess.Popen(
                        [
                            *CLI,
                            "batch",
                            "--file",
                            str(spec),
                            "--server",
                            ",".join(order),
                            "--token",
                            tokens[user],
                            "--out",
                            str(work / f"results-{i}"),
                            "--timeout",
                            str(args.timeout),
                        ],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )

        kills: list[dict] = []
        restarts: list[tuple[float, Proc]] = []
        next_kill = time.monotonic() + rng.uniform(0.5, 2 * args.interval)
        last_kill = None
        while any(b.poll() is None for b in batches):
            now = time.monotonic()
            if now - t0 > args.timeout + 60:
                break
            for due, proc in [r for r in restarts if r[0] <= now]:
                proc.start()
                restarts.remove((due, proc))
            if len(kills) < args.kills and now >= next_kill:
                pool = servers if rng.random() < args.server_share else runners
                victims = [p for p in pool if p.alive()]
                if victims:
                    victim = rng.choice(victims)
                    victim.kill()
                    last_kill = now
                    kills.append({"t": round(now - t0, 2), "victim": victim.name})
                    restarts.append((now + rng.uniform(0.5, 3.0), victim))
                next_kill = now + rng.uniform(0.2, 2 * args.interval - 0.2)
            time.sleep(0.05)
        for _due, proc in restarts:
            proc.start()
        elapsed = time.monotonic() - t0
        batch_codes = [b.wait(timeout=60) for b in batches]
        for u in urls:
            wait_healthy(u)
        outcome = verify(url, users, args.jobs, urls)
        batch_rows = []
        for i in range(args.users):
            path = work / f"results-{i}.json"
            if path.is_file():
                batch_rows += json.loads(path.read_text())["rows"]
        report = {
            "date": started_at.isoformat(timespec="seconds"),
            "seed": seed,
            "command": " ".join(["python", "bench/chaos.py", *sys.argv[1:]]),
            "jobs": args.jobs,
            "kills": len(kills),
            "kills_target": args.kills,
            "lost": outcome["lost"],
            "duplicated": outcome["duplicated"],
            "leaderboards_consistent": not outcome["leaderboard_mismatches"],
            "jobs_over_3_attempts": sum(v for k, v in outcome["attempts"].items() if int(k) > 3),
            "kills_by_victim": {
                name: sum(k["victim"] == name for k in kills) for name in sorted({p.name for p in procs})
            },
            "server_kills": sum(k["victim"].startswith("server") for k in kills),
            "runner_kills": sum(k["victim"].startswith("runner") for k in kills),
            "timings": {
                "total_s": round(elapsed, 1),
                "jobs_per_min": round(args.jobs / elapsed * 60, 1),
                "chaos_s": kills[-1]["t"] if kills else 0.0,
                "after_last_kill_s": round(t0 + elapsed - last_kill, 1) if last_kill else None,
                "latency_s": outcome.pop("latency_s"),
            },
            "batch_exit_codes": batch_codes,
            "batch_rows_with_verdict": sum(
                r["status"] not in ("UNSUBMITTED", "QUEUED", "RUNNING", "ERROR", "REFUSED") for r in batch_rows
            ),
            "setup": {
                "servers": args.servers,
                "runners": args.runners,
                "users": args.users,
                "lease_s": args.lease,
                "max_attempts": args.max_attempts,
                "database": "postgresql",
                "workload": "axpy_dest ranked, budget 0.05 s, CPU",
            },
            "machine": machine(),
            "details": outcome,
            "kill_log": kills,
        }
    finally:
        for b in batches:
            if b.poll() is None:
                b.kill()
        for p in procs:
            p.stop()
        if not args.keep:
            with admin.connect() as c:
                c.execute(text(f"DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"))
        admin.dispose()
    out = args.out or ROOT / "bench" / "results" / f"chaos-{dt.date.today().isoformat()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("jobs", "kills", "lost", "duplicated", "leaderboards_consistent")}
            | {"total_s": report["timings"]["total_s"]}
        )
    )
    print(f"written to {out}; logs in {logs}")
    ok = report["lost"] == 0 and report["duplicated"] == 0 and report["leaderboards_consistent"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
