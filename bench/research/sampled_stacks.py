"""Where a whole run's wall time goes, in the supervisor and in every worker, from sampled stacks.

round_costs.py counts the supervisor's pieces from inside; it cannot see the worker, and a
piece that waits (a socket, a lock) looks the same as one that works. This runs a command
(a `gpuarena run` or `run-many`) under py-spy: the command's own process from its start, and
each worker as it appears (py-spy attached by pid: the sandbox's bubblewrap keeps it out of
`--subprocesses`), idle stacks included, so the shares are of wall time. It writes the raw
stacks and, per process, each function's inclusive and own share.

    python3 bench/research/sampled_stacks.py --out DIR -- python3 -m gpuarena run P S --device cuda

py-spy travels as a wheel (bench/gpu/carry.sh); it needs ptrace rights over the workers (root).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

WORKER = "gpuarena.harness.inside.sandbox"
LINE = re.compile(r" \((?P<where>[^()]*?):\d+\)$")


def is_python_worker(pid: int) -> bool:
    """A worker's own interpreter (not the bubblewrap processes around it, whose args hold the same words)."""
    try:
        exe = os.path.realpath(f"/proc/{pid}/exe")
        args = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return WORKER in args and "python" in os.path.basename(exe)


def record(pid: int, out: Path, rate: int, py_spy: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(pid),
            "--idle",
            "--threads",
            "--nonblocking",
            "-r",
            str(rate),
            "--format",
            "raw",
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def find_py_spy() -> str:
    """py-spy on PATH, beside this Python, or in a `pip install --target` folder's bin/ on sys.path."""
    candidates = [Path(sys.executable).with_name("py-spy")] + [Path(p) / "bin" / "py-spy" for p in sys.path if p]
    found = shutil.which("py-spy") or next((str(c) for c in candidates if c.is_file()), None)
    if found is None:
        raise SystemExit("py-spy not found: pip install py-spy (bench/gpu/carry.sh carries it to the GPU machine)")
    return found


def function(frame: str) -> str:
    """A frame without its line number: 'name (file)'."""
    return LINE.sub(lambda m: f" ({m['where']})", frame)


def summarize(raw: Path, rate: int, top: int) -> dict[str, object]:
    """Per thread: seconds per function, inclusive (on the stack) and own (at its top), from
    py-spy's raw stacks (idle included, so a thread's seconds are its wall time)."""
    threads: dict[str, dict[str, Counter[str]]] = {}
    names: dict[str, str] = {}
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        thread, *rest = stack.split(";")
        frames = [function(f) for f in rest]
        name = thread.split(":", 1)[0].strip()  # 'thread (tid): Name': the name may be missing
        names.setdefault(name, thread.split(":", 1)[-1].strip())
        seen = threads.setdefault(name, {"inclusive": Counter(), "own": Counter(), "total": Counter()})
        n = int(count)
        seen["total"]["all"] += n
        for frame in set(frames):
            seen["inclusive"][frame] += n
        if frames:
            seen["own"][frames[-1]] += n
    return {
        f"{name} {names[name]}": {
            "seconds": round(seen["total"]["all"] / rate, 3),
            "inclusive_s": {k: round(v / rate, 3) for k, v in seen["inclusive"].most_common(top)},
            "own_s": {k: round(v / rate, 3) for k, v in seen["own"].most_common(top)},
        }
        for name, seen in sorted(threads.items(), key=lambda item: -item[1]["total"]["all"])
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rate", type=int, default=500, help="samples a second")
    parser.add_argument("--top", type=int, default=60)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    py_spy = find_py_spy()
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    run = subprocess.Popen(
        command, stdout=(args.out / "stdout.txt").open("wb"), stderr=(args.out / "stderr.txt").open("wb")
    )
    spies = {run.pid: record(run.pid, args.out / f"stacks-{run.pid}-main.txt", args.rate, py_spy)}
    while run.poll() is None:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) not in spies and is_python_worker(int(entry.name)):
                pid = int(entry.name)
                spies[pid] = record(pid, args.out / f"stacks-{pid}-worker.txt", args.rate, py_spy)
        time.sleep(0.01)
    wall = time.perf_counter() - started
    for spy in spies.values():
        try:
            spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
    summary = {
        "command": command,
        "wall_s": round(wall, 3),
        "rc": run.returncode,
        "processes": {raw.name: summarize(raw, args.rate, args.top) for raw in sorted(args.out.glob("stacks-*.txt"))},
    }
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for process, threads in summary["processes"].items():  # type: ignore[attr-defined]
        for thread, body in list(threads.items())[:1]:  # the busiest: the main thread
            print(f"== {process} {thread}: {body['seconds']} s sampled")
            for fn, seconds in list(body["inclusive_s"].items())[:40]:
                print(f"  {seconds:8.3f} s  {fn}")


if __name__ == "__main__":
    main()
