#!/usr/bin/env python3
"""Where a one-shot `gpuarena run` spends its wall time, thread by thread (issue 18): runs the
CLI in a child process with a thread that reads every thread's Python stack each millisecond,
each reading weighed by the time since the one before (a thread in a long C call that holds
the interpreter is read late, and its time still counts). cProfile cannot do this: it sees
one thread, and the CLI leaves through os._exit after its atexit hooks (this writes there).

Prints, for the main thread, the functions with the most time on their stack (cumulative)
and as the innermost frame (self), the same for the other threads, and the main thread's
innermost gpuarena frame on a 100 ms timeline; everything also in --out as JSON.

    python3 bench/research/run_stacks.py --out s.json -- level1/softmax examples/softmax/triton.py \
        --device cuda --workload square-8192 --mode test
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import atexit, collections, json, os, sys, threading, time
start = time.perf_counter()
cumulative = collections.defaultdict(collections.Counter)  # thread name -> function -> seconds
innermost = collections.defaultdict(collections.Counter)
timeline = []  # (seconds since start, main thread's innermost gpuarena frame)
stop = threading.Event()

def where(code):
    return f"{code.co_filename.split('site-packages/')[-1].split('/src/')[-1]}:{code.co_firstlineno}({code.co_name})"

def sample():
    me, last = threading.get_ident(), time.perf_counter()
    while not stop.is_set():
        time.sleep(0.001)
        now = time.perf_counter()
        weight, last = now - last, now
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            name = names.get(ident, f"thread-{ident}")
            seen, leaf, ours = set(), None, None
            while frame is not None:
                label = where(frame.f_code)
                leaf = leaf or label
                if ours is None and "gpuarena/" in frame.f_code.co_filename:
                    ours = label
                if label not in seen:
                    seen.add(label)
                    cumulative[name][label] += weight
                frame = frame.f_back
            innermost[name][leaf] += weight
            if name == "MainThread":
                timeline.append((round(now - start, 4), ours or leaf))

def dump():
    stop.set()
    sampler.join()
    with open(os.environ["STACKS_OUT"], "w") as f:
        json.dump({"cumulative": {k: dict(v) for k, v in cumulative.items()},
                   "innermost": {k: dict(v) for k, v in innermost.items()}, "timeline": timeline,
                   "wall_s": time.perf_counter() - start}, f)

sampler = threading.Thread(target=sample, name="stacks", daemon=True)
sampler.start()
atexit.register(dump)
from gpuarena.cli import entry
sys.argv = ["gpuarena"] + sys.argv[1:]
entry.main()
"""


def top(counter: dict[str, float], n: int) -> list[tuple[str, float]]:
    return [(k, round(v, 3)) for k, v in sorted(counter.items(), key=lambda kv: -kv[1])[:n]]


def windows(timeline: list[tuple[float, str]], width: float = 0.1) -> list[tuple[float, str]]:
    """The main thread's most-seen frame in each window of `width` seconds."""
    out: list[tuple[float, str]] = []
    bucket: dict[str, int] = {}
    edge = width
    for t, label in timeline:
        while t >= edge:
            if bucket:
                out.append((round(edge - width, 2), max(bucket, key=bucket.__getitem__)))
            bucket, edge = {}, edge + width
        bucket[label] = bucket.get(label, 0) + 1
    if bucket:
        out.append((round(edge - width, 2), max(bucket, key=bucket.__getitem__)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="run-stacks.json")
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("cli_args", nargs="+", help="after --: the arguments of `gpuarena run`")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        spawned = time.time()
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, "run", *args.cli_args, "--json"],
            env=dict(os.environ, STACKS_OUT=out.name),
            capture_output=True,
            text=True,
        )
        wall = time.time() - spawned
        stacks = json.loads(Path(out.name).read_text() or "{}")
    record = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    summary = {
        "command": "python3 bench/research/run_stacks.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": round(wall, 3),
        "status": record.get("status"),
        "duration_s": record.get("duration_s"),
        "phases": record.get("phases"),
        "cumulative": {k: top(v, args.top) for k, v in stacks.get("cumulative", {}).items()},
        "innermost": {k: top(v, args.top // 2) for k, v in stacks.get("innermost", {}).items()},
        "main_timeline": windows(stacks.get("timeline", [])),
        "stderr_tail": proc.stderr[-600:],
    }
    Path(args.out).write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: summary[k] for k in ("wall_s", "status", "duration_s", "phases")}))
    for kind in ("cumulative", "innermost"):
        for thread, rows in summary[kind].items():
            print(f"== {kind}: {thread}")
            for label, seconds in rows:
                print(f"{seconds:8.3f}  {label}")
    print("== main thread, 100 ms windows")
    for t, label in summary["main_timeline"]:
        print(f"{t:6.2f}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
