#!/usr/bin/env python3
"""Where a warm-path job's seconds go, step by step (issue 18: 3.9 s a job on an H100 against
1.5 s). Judges N distinct copies of an example through one Evaluator, as `gpuarena run-many`
does, and times the supervisor's steps by wrapping them: the worker's requests by op, the
environment's capture and finish, the PM sampler's start and stop, the worker's start and
close. Prints the median of each step over the jobs after the first, as JSON.

    python3 bench/research/warm_breakdown.py --device cuda --n 12 --workload square-8192 --out b.json
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

STEPS: dict[str, list[float]] = collections.defaultdict(list)
JOB: dict[str, float] = collections.defaultdict(float)
CALLS: dict[str, int] = collections.defaultdict(int)


def timed(owner: object, name: str, label: str | None = None, key=None) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            step = label or name
            if key is not None:
                step = f"{step}:{key(args, kwargs)}"
            JOB[step] += time.perf_counter() - started
            CALLS[step] += 1

    setattr(owner, name, wrapper)


def install() -> None:
    """Wraps the supervisor's steps (and those inside each timed round) to time them."""
    from gpuarena.contracts import messages
    from gpuarena.harness import measure, rounds_audit, supervisor, transport
    from gpuarena.harness.device import device_audit, environment
    from gpuarena.harness.launch import process, started

    timed(process.WorkerProcess, "request", "request", key=lambda a, k: a[1].op)
    request = process.WorkerProcess.request

    def prepare_steps(self, message, *args, **kwargs):
        reply = request(self, message, *args, **kwargs)
        for name, seconds in reply.steps.items() if isinstance(reply, messages.Prepared) else ():
            JOB[f"prepare.{name}"] += seconds
        return reply

    process.WorkerProcess.request = prepare_steps
    timed(process.WorkerProcess, "close", "worker.close")
    timed(environment, "capture_nvidia", "environment.capture")
    timed(environment, "gpu_state", "environment.gpu_state")
    timed(device_audit.DeviceSampler, "__init__", "sampler.start")
    timed(device_audit.DeviceSampler, "close", "sampler.close")
    timed(started.StartedWorker, "__init__", "worker.start")
    timed(transport.SharedArena, "close", "arena.close")
    timed(supervisor, "restore_caches", "restore_caches")
    timed(measure, "measure_workload", "measure_workload")
    timed(supervisor, "redact", "redact")
    supervisor.measure_workload = measure.measure_workload
    for name in ("begin", "twins", "finish", "stop", "_wait_quiet", "_sample_twins"):
        timed(rounds_audit.RoundsAudit, name, f"audit.{name}")
    for name in ("start", "stop", "idle"):
        timed(device_audit.DeviceSampler, name, f"sampler.{name}")
    # inside the timed rounds: what each round costs besides the calls themselves
    for name in (
        "refresh_sets",
        "check_outputs",
        "commit_checked",
        "commit_copies",
        "converged",
        "bootstrap_rounds",
        "summarize",
        "_speed_of_light",
        "compare",
        "judged",
    ):
        timed(measure, name, f"measure.{name}")
    for name in ("solution", "reference", "_sample", "_segment"):
        timed(rounds_audit.RoundsAudit, name, f"audit.{name}")
    for name in ("segment", "mark"):
        timed(device_audit.DeviceSampler, name, f"sampler.{name}")
    from gpuarena.harness import session, twin
    from gpuarena.harness.device import timing

    for name in ("make", "fill", "reference", "modified_input", "allocate"):
        timed(session.WorkloadSession, name, f"session.{name}")
    timed(timing.Timer, "run_block", "timer.run_block")
    timed(twin.ReferenceTwin, "block", "twin.block")
    for name in ("_workload", "_check_correctness"):
        if hasattr(supervisor.Supervisor, name):
            timed(supervisor.Supervisor, name, f"supervisor.{name}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--mode", default="benchmark")
    parser.add_argument("--workload", default="small-64x1000")
    parser.add_argument("--example", default=str(REPO / "examples" / "softmax" / "triton.py"))
    parser.add_argument("--out", default="warm-breakdown.json")
    args = parser.parse_args()

    install()

    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.harness.evaluator import Evaluator
    from gpuarena.harness.supervisor import RunOptions
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    problem = resolve_problem("level1/softmax")
    source = Path(args.example).read_text()
    jobs = []
    with tempfile.TemporaryDirectory(prefix="gpuarena-breakdown-") as folder, Evaluator(args.device) as evaluator:
        for i in range(args.n):
            path = Path(folder) / f"candidate_{i:03d}.py"
            path.write_text(f"# candidate {i}\n" + source)
            JOB.clear()
            CALLS.clear()
            options = RunOptions(device=args.device, mode=args.mode, workloads=[args.workload])
            begun = time.perf_counter()
            record = evaluator.judge(problem, load_solution(path), options)
            wall = time.perf_counter() - begun
            jobs.append(
                {
                    "wall_s": round(wall, 3),
                    "status": record.status.value,
                    "phases": record.phases,
                    "steps": {k: round(v, 4) for k, v in JOB.items()},
                    "calls": dict(CALLS),
                }
            )
            print(json.dumps(jobs[-1]), flush=True)
    later = jobs[1:] or jobs
    steps = sorted({k for j in later for k in j["steps"]})
    summary = {
        "command": "python3 bench/research/warm_breakdown.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "median_wall_s": statistics.median(j["wall_s"] for j in later),
        "median_steps_s": {k: round(statistics.median(j["steps"].get(k, 0.0) for j in later), 4) for k in steps},
        "median_calls": {k: statistics.median(j["calls"].get(k, 0) for j in later) for k in steps},
        "median_phases_s": {
            k: round(statistics.median(j["phases"].get(k, 0.0) for j in later), 4) for k in later[0]["phases"]
        },
        "jobs": jobs,
    }
    Path(args.out).write_text(json.dumps(summary, indent=1))
    print(
        json.dumps(
            {k: summary[k] for k in ("median_wall_s", "median_steps_s", "median_calls", "median_phases_s")}, indent=1
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
