"""Submit-to-result latency of one job on an idle runner, with and without the job process
started ahead (`gpuarena runner --prewarm`, the default, against `--no-prewarm`).

A server (`gpuarena serve --no-runner`, SQLite in a temporary folder) and one runner on
cpu:0; --jobs test-mode jobs of the fixture problem axpy_dest, one at a time, each
submitted --idle seconds after the last finished (the runner has gone idle). The first job
of each run is left out of the median: no process was started ahead of it. Runs alternate
(off, on, off, on, ...) so drift on the machine touches both alike.

    python bench/job_latency.py --runs 2 --jobs 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import CLI, ROOT, cli, free_port, machine, wait_healthy


def one_run(prewarm: bool, jobs: int, idle_s: float) -> list[float]:
    import httpx

    work = Path(tempfile.mkdtemp(prefix="gpuarena-job-latency-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    env.update(
        GPUARENA_HOME=str(work / "home"),
        XDG_CONFIG_HOME=str(work / "config"),
        GPUARENA_SUBMIT_LIMIT="0",
        GPUARENA_MAX_IN_FLIGHT="0",
        PYTHONPATH=str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
    )
    url = f"http://127.0.0.1:{(port := free_port())}"
    server = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--no-runner",
            "--port",
            str(port),
            "--problems",
            str(ROOT / "tests" / "fixtures" / "problems"),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    runner = None
    try:
        wait_healthy(url, timeout=120, process=server)
        user = cli(env, "users", "add", "bench").split()[-1]
        host = cli(env, "users", "add", "bench-host", "--role", "runner").split()[-1]
        runner = subprocess.Popen(
            [
                *CLI,
                "runner",
                "--devices",
                "cpu:0",
                "--server",
                url,
                "--token",
                host,
                "--health-interval",
                "0",
                "--prewarm" if prewarm else "--no-prewarm",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        http = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {user}"}, timeout=30)
        while not any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()):
            time.sleep(0.2)
        source = (ROOT / "tests" / "fixtures" / "solutions" / "dest_good.py").read_bytes()
        latencies = []
        for _ in range(jobs):
            time.sleep(idle_s)
            t0 = time.monotonic()
            made = http.post(
                "/api/submissions/upload",
                files={"file": ("dest_good.py", source)},
                data={"problem": "axpy_dest", "device_kind": "cpu", "mode": "test"},
            )
            made.raise_for_status()
            sid = made.json()["id"]
            while not (state := http.get(f"/api/submissions/{sid}").json())["done"]:
                time.sleep(0.05)
            if state["status"] != "PASSED":
                raise SystemExit(f"job {sid}: {state['status']}")
            latencies.append(round(time.monotonic() - t0, 3))
        return latencies
    finally:
        for process in (runner, server):
            if process is not None:
                process.terminate()
                process.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="runs of each setting")
    parser.add_argument("--jobs", type=int, default=6)
    parser.add_argument("--idle", type=float, default=3.0, help="seconds between one result and the next submission")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    runs: dict[str, list[list[float]]] = {"no-prewarm": [], "prewarm": []}
    for _ in range(args.runs):
        for prewarm in (False, True):
            name = "prewarm" if prewarm else "no-prewarm"
            runs[name].append(one_run(prewarm, args.jobs, args.idle))
            print(name, runs[name][-1], flush=True)
    medians = {name: statistics.median(x for run in r for x in run[1:]) for name, r in runs.items()}
    record = {
        "command": " ".join(["python", "bench/job_latency.py", *sys.argv[1:]]),
        "runs": runs,
        "median_s_after_first": medians,
        "machine": machine(),
    }
    print(json.dumps(medians))
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
