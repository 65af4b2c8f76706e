"""Submit-to-result latency of one job on an idle runner, with and without the job process
started ahead (`gpuarena runner --prewarm`, the default, against `--no-prewarm`).

A server (`gpuarena serve --no-runner`, SQLite in a temporary folder) and one runner on
cpu:0; --jobs test-mode jobs of the fixture problem axpy_dest (by default: --problems,
--problem, --solution, --device and --mode judge another), one at a time, each
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
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import CLI, ROOT, cli, free_port, machine, wait_healthy


@dataclass
class Served:
    """What the runner judges: the problems the server holds, one of them, a solution file (read
    as `gpuarena run` reads it: GPU MODE and KernelBench files too), the runner's device slot, the
    mode, and whether each job is a distinct copy of the file (a new submission every time)."""

    problems: Path = ROOT / "tests" / "fixtures" / "problems"
    problem: str = "axpy_dest"
    solution: Path = ROOT / "tests" / "fixtures" / "solutions" / "dest_good.py"
    device: str = "cpu:0"
    mode: str = "test"
    distinct: bool = False


def one_run(prewarm: bool, jobs: int, idle_s: float, served: Served | None = None) -> list[dict]:
    """One server and one runner; `jobs` submissions one at a time, each --idle seconds after the
    last finished. Each job: its submit-to-result seconds as the client saw them, its status, and
    the record's duration and phases (what the runner's job process measured)."""
    import httpx

    import gpuarena.solution_readers  # noqa: F401  (other projects' files read as `gpuarena run` reads them)
    from gpuarena.solutions.loader import load_solution

    served = served or Served()
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
    command = [*CLI, "serve", "--no-runner", "--port", str(port), "--problems", str(served.problems)]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
                served.device,
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
        while not (kinds := [k["name"] for k in http.get("/api/device-kinds").json()]):
            time.sleep(0.2)
        text = served.solution.read_text()
        results = []
        for i in range(jobs):
            time.sleep(idle_s)
            copy = work / f"job_{i}_{served.solution.name}"
            copy.write_text((f"# job {i}: a distinct submission\n" if served.distinct else "") + text)
            solution = load_solution(copy).model_dump(mode="json")
            t0 = time.monotonic()
            made = http.post(
                "/api/submissions",
                json={"problem": served.problem, "device_kind": kinds[0], "mode": served.mode, "solution": solution},
            )
            made.raise_for_status()
            sid = made.json()["id"]
            while not (state := http.get(f"/api/submissions/{sid}").json())["done"]:
                time.sleep(0.05)
            seconds = round(time.monotonic() - t0, 3)
            evaluation = state.get("evaluation") or {}
            results.append(
                {
                    "seconds": seconds,
                    "status": state["status"],
                    "reason": state["reason"][:500],
                    "duration_s": evaluation.get("duration_s"),
                    "phases": evaluation.get("phases"),
                }
            )
            if state["status"] != "PASSED":
                break
        return results
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
    parser.add_argument("--problems", type=Path, default=Served.problems, help="the server's problems folder")
    parser.add_argument("--problem", default=Served.problem)
    parser.add_argument("--solution", type=Path, default=Served.solution)
    parser.add_argument("--device", default=Served.device, help="the runner's device slot (cpu:0, cuda:0)")
    parser.add_argument("--mode", default=Served.mode)
    parser.add_argument("--distinct", action="store_true", help="each job a distinct copy of the file")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    served = Served(args.problems, args.problem, args.solution, args.device, args.mode, args.distinct)
    runs: dict[str, list[list[float]]] = {"no-prewarm": [], "prewarm": []}
    for _ in range(args.runs):
        for prewarm in (False, True):
            name = "prewarm" if prewarm else "no-prewarm"
            jobs = one_run(prewarm, args.jobs, args.idle, served)
            if any(j["status"] != "PASSED" for j in jobs):
                raise SystemExit(f"{name}: {jobs[-1]['status']}: {jobs[-1]['reason']}")
            runs[name].append([j["seconds"] for j in jobs])
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
