#!/usr/bin/env python3
"""Where a one-shot `gpuarena run` spends the wall time its record does not show (issue 18:
about 2.3 s of a 5.6 s run on an H100 happen outside `duration_s`). Runs the CLI in a child
process that marks, on one clock, the moments it passes: the interpreter up, the CLI
imported, the worker started ahead, the supervisor (torch) imported, evaluate() begun and
ended, the record printed, the last atexit hook; the parent adds the spawn and the reap.
Prints each gap, median over the runs, as JSON. TIMELINE_NO_WARM_TRITON=1: the worker started
ahead does not compute Triton's cache key (harness/inside/triton_key.py), for an A/B on one machine.

    python3 bench/research/cli_timeline.py --n 3 --out t.json -- level1/softmax examples/softmax/triton.py \
        --device cuda --workload square-8192
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

REPO = Path(__file__).resolve().parents[2]

CHILD = r"""
import atexit, json, os, sys, time
marks = [("interpreter up", time.time())]
def mark(name):
    marks.append((name, time.time()))
def dump():
    mark("last atexit hook")
    with open(os.environ["TIMELINE_OUT"], "w") as f:
        json.dump(marks, f)
atexit.register(dump)  # registered first: runs last
from gpuarena.cli import early, entry
mark("entry imported")
if os.environ.get("TIMELINE_NO_WARM_TRITON"):  # the worker's Triton key left to the first launch (A/B)
    from gpuarena.harness.launch import started as _started
    _started.warm_triton = lambda prepare_on: False
ahead, take = early.worker_ahead, early.take
def worker_ahead(*a, **k):
    w = ahead(*a, **k)
    mark("worker started ahead")
    return w
def timed_take(*a, **k):
    mark("cli imported")
    from gpuarena.cli import app as cli
    global run
    run = cli._run
    cli._run = timed_run
    return take(*a, **k)
def timed_run(*a, **k):
    mark("_run begun")
    from gpuarena.harness.launch import started
    from gpuarena.harness import judge
    mark("supervisor and torch imported")
    evaluate, wait = judge.evaluate, started.StartedWorker.wait_prepared
    from gpuarena.harness.device import icache_sweep
    from gpuarena.harness.launch import process
    request, image = process.WorkerProcess.request, icache_sweep.image_text
    def timed_request(self, message, *a, **k):
        op = message.op
        if op in ("ready", "prepare"):
            mark(f"worker {op} asked")
        try:
            return request(self, message, *a, **k)
        finally:
            if op in ("ready", "prepare", "build"):
                mark(f"worker {op} answered")
    def timed_image(*a, **k):
        mark("icache image begun")
        try:
            return image(*a, **k)
        finally:
            mark("icache image made")
    process.WorkerProcess.request, icache_sweep.image_text = timed_request, timed_image
    def wait_prepared(self):
        mark("waiting for the worker's prepare")
        try:
            return wait(self)
        finally:
            mark("worker prepared")
    def timed_evaluate(*a, **k):
        mark("evaluate begun")
        try:
            return evaluate(*a, **k)
        finally:
            mark("evaluate ended")
    judge.evaluate, started.StartedWorker.wait_prepared = timed_evaluate, wait_prepared
    try:
        return run(*a, **k)
    finally:
        mark("record printed")
early.worker_ahead, early.take = worker_ahead, timed_take
sys.argv = ["gpuarena"] + sys.argv[1:]
entry.main()
"""


def one_run(cli_args: list[str]) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        env = dict(os.environ, TIMELINE_OUT=out.name)
        spawned = time.time()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, "run", *cli_args, "--json"], env=env, capture_output=True, text=True
        )
        reaped = time.time()
        marks = [("spawned", spawned)] + [tuple(m) for m in json.loads(Path(out.name).read_text() or "[]")]
    marks.append(("reaped", reaped))
    marks.sort(key=lambda m: m[1])  # threads mark too (the worker's preparation)
    gaps = {f"{a[0]} -> {b[0]}": round(b[1] - a[1], 3) for a, b in zip(marks, marks[1:])}
    timeline = [(name, round(t - spawned, 3)) for name, t in marks]
    record = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    return {
        "wall_s": round(reaped - spawned, 3),
        "duration_s": record.get("duration_s"),
        "status": record.get("status"),
        "phases": record.get("phases"),
        "gaps_s": gaps,
        "timeline_s": timeline,
        "stderr_tail": proc.stderr[-400:] if proc.returncode not in (0, 1) else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--out", default="cli-timeline.json")
    parser.add_argument("cli_args", nargs="+", help="after --: the arguments of `gpuarena run`")
    args = parser.parse_args()
    runs = [one_run(args.cli_args) for _ in range(args.n)]
    for r in runs:
        print(json.dumps(r), flush=True)
    later = runs[1:] or runs
    gaps = list(later[0]["gaps_s"])
    summary = {
        "command": "python3 bench/research/cli_timeline.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "median_wall_s": statistics.median(r["wall_s"] for r in later),
        "median_duration_s": statistics.median(r["duration_s"] or 0.0 for r in later),
        "median_gaps_s": {g: statistics.median(r["gaps_s"].get(g, 0.0) for r in later) for g in gaps},
        "median_timeline_s": {
            name: statistics.median(dict(r["timeline_s"]).get(name, 0.0) for r in later)
            for name, _ in later[0]["timeline_s"]
        },
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("median_wall_s", "median_duration_s", "median_timeline_s")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
