#!/usr/bin/env python3
"""How long a verdict takes, end to end, against issue 18's targets: whole `gpuarena run`
processes, as a contestant or an agent starts them, timed from outside (wall seconds), with
the record's own duration and phases beside them (where the fixed cost goes).

    python3 bench/eval_latency.py [--device cpu|cuda] [--repeat 3] [--out eval-latency.json]

Cases on the CPU: `test` mode on the small softmax (target 2 s). On CUDA: one workload in
`benchmark` mode (5 s) and in `test` mode (3 s), and all of level1/softmax's workloads with
the ncu-duration phase (15 s), each with the Triton example (built once before timing, so
"a solution already built" holds). The warm path's targets (1.5 s a job, 40 verdicts a
minute) are bench/warm_path.py's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOFTMAX = REPO / "examples" / "softmax"


def cases(device: str) -> list[dict]:
    """(name, command arguments, target seconds) for the device kind."""
    if device == "cpu":
        return [
            {
                "name": "cpu test mode, small softmax",
                "target_s": 2.0,
                "args": ["run", "level1/softmax", str(SOFTMAX / "pytorch.py"), "--device", "cpu", "--mode", "test"],
            }
        ]
    triton = str(SOFTMAX / "triton.py")
    return [
        {
            "name": "cuda benchmark mode, one workload (square-8192)",
            "target_s": 5.0,
            "args": ["run", "level1/softmax", triton, "--device", device, "--workload", "square-8192"],
        },
        {
            "name": "cuda test mode, one workload (square-8192)",
            "target_s": 3.0,
            "args": [
                "run",
                "level1/softmax",
                triton,
                "--device",
                device,
                "--mode",
                "test",
                "--workload",
                "square-8192",
            ],
        },
        {
            "name": "cuda benchmark mode, all 9 workloads, ncu-duration phase on",
            "target_s": 15.0,
            "args": ["run", "level1/softmax", triton, "--device", device, "--ncu"],
        },
        {
            "name": "cuda benchmark mode, one workload, ncu-duration phase on (as in ranked mode)",
            "target_s": 5.0,
            "args": ["run", "level1/softmax", triton, "--device", device, "--workload", "square-8192", "--ncu"],
        },
        {
            "name": "cuda benchmark mode, one workload, the CUDA example (a torch extension: its build kept)",
            "target_s": 5.0,
            "args": ["run", "level1/softmax", str(SOFTMAX / "cuda"), "--device", device, "--workload", "square-8192"],
        },
    ]


def one_run(args: list[str]) -> dict:
    """One `gpuarena run ... --json` process: wall seconds, verdict, duration and phases."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gpuarena", *args, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "160"},
    )
    wall = time.perf_counter() - started
    try:
        record = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"wall_s": wall, "error": f"exit {done.returncode}: {done.stderr[-800:]}"}
    return {
        "wall_s": round(wall, 3),
        "status": record.get("status"),
        "duration_s": record.get("duration_s"),
        "phases": record.get("phases", {}),
    }


def measure(case: dict, repeat: int) -> dict:
    first = one_run(case["args"])  # builds and keeps what a second run reuses (the solution's build, the peaks)
    runs = [one_run(case["args"]) for _ in range(repeat)]
    walls = [r["wall_s"] for r in runs if "error" not in r]
    median = statistics.median(walls) if walls else None
    phases: dict[str, float] = {}
    for name in dict.fromkeys(name for r in runs for name in r.get("phases", {})):  # in run order
        values = [r["phases"][name] for r in runs if name in r.get("phases", {})]
        phases[name] = round(statistics.median(values), 3)
    durations = [r["duration_s"] for r in runs if r.get("duration_s") is not None]
    return {
        **case,
        "command": "gpuarena " + " ".join(case["args"]),
        "first_run": first,
        "runs": runs,
        "median_wall_s": median,
        "median_duration_s": statistics.median(durations) if durations else None,
        "median_phases": phases,
        "outside_record_s": round(median - statistics.median(durations), 3)
        if median is not None and durations
        else None,
        "met": median is not None and median <= case["target_s"],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default="eval-latency.json")
    args = parser.parse_args()
    results = [measure(case, args.repeat) for case in cases(args.device)]
    result = {
        "device": args.device,
        "date": time.strftime("%Y-%m-%d"),
        "repeat": args.repeat,
        "cases": results,
        "not_measured": ["warm path: 1.5 s a small job, 40 single-workload verdicts a minute (bench/warm_path.py)"],
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for r in results:
        phases = ", ".join(f"{k} {v:.2f}" for k, v in r["median_phases"].items())
        print(
            f"{'met ' if r['met'] else 'MISS'} {r['name']}: median {r['median_wall_s']} s wall (target "
            f"{r['target_s']} s); in the record {r['median_duration_s']} s: {phases}; outside it "
            f"(the CLI's own start) {r['outside_record_s']} s; the first run {r['first_run'].get('wall_s')} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
