#!/usr/bin/env python3
"""The warm path's throughput (issue 18's targets: at most 1.5 s a small job, at least 40
single-workload benchmark verdicts a minute on one H100, over 100 distinct solutions): one
`gpuarena run-many` process judges N distinct copies of an example (each with its own content
hash, so nothing of one is reused for another), timed from outside, with each record's own
duration.

    python3 bench/warm_path.py --device cuda --n 100 --workload square-8192 [--mode benchmark] --out warm.json
    python3 bench/warm_path.py --device cpu --n 20 --mode test --workload small-64x1000
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

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--mode", default="benchmark")
    parser.add_argument("--workload", default="small-64x1000")
    parser.add_argument("--example", default=str(REPO / "examples" / "softmax" / "pytorch.py"))
    parser.add_argument("--ahead", type=int, help="workers started ahead (run-many --ahead)")
    parser.add_argument("--out", default="warm-path.json")
    args = parser.parse_args()
    source = Path(args.example).read_text()
    with tempfile.TemporaryDirectory(prefix="gpuarena-warm-") as folder:
        paths = []
        for i in range(args.n):
            path = Path(folder) / f"candidate_{i:03d}.py"
            path.write_text(f"# candidate {i}: a distinct solution (its own content hash)\n" + source)
            paths.append(str(path))
        command = [
            sys.executable,
            "-m",
            "gpuarena",
            "run-many",
            "level1/softmax",
            *paths,
            "--device",
            args.device,
            "--mode",
            args.mode,
            "--workload",
            args.workload,
            "--jsonl",
            *(["--ahead", str(args.ahead)] if args.ahead else []),
        ]
        started = time.perf_counter()
        done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env={**os.environ, "COLUMNS": "160"})
        wall = time.perf_counter() - started
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    statuses = [a.get("status") or a.get("error") for a in answers]
    seconds = [a["seconds"] for a in answers if "seconds" in a]
    durations = [a["record"]["duration_s"] for a in answers if "record" in a]
    later = seconds[1:] or seconds
    result = {
        "command": "python3 bench/warm_path.py " + " ".join(sys.argv[1:]),
        "device": args.device,
        "n": args.n,
        "mode": args.mode,
        "workload": args.workload,
        "date": time.strftime("%Y-%m-%d"),
        "wall_s": round(wall, 2),
        "verdicts_per_minute": round(60 * len(answers) / wall, 1),
        "first_job_s": seconds[0] if seconds else None,
        "median_job_s_after_the_first": statistics.median(later) if later else None,
        "max_job_s_after_the_first": max(later) if later else None,
        "median_record_duration_s": statistics.median(durations) if durations else None,
        "statuses": {s: statuses.count(s) for s in set(statuses)},
        "exit": done.returncode,
        "median_phases": {
            k: round(statistics.median(a["record"]["phases"].get(k, 0) for a in answers if "record" in a), 3)
            for k in (answers[0]["record"]["phases"] if answers and "record" in answers[0] else {})
        },
        "stderr_tail": done.stderr[-1500:] if done.returncode not in (0, 1) else "",
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "stderr_tail"}, indent=1))
    return 0 if set(statuses) == {"PASSED"} else 1


if __name__ == "__main__":
    sys.exit(main())
