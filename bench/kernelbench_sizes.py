"""KernelBench problems at their published sizes, judged on one GPU (issue 47: "memory sized by
the workload"). Run on an NVIDIA machine:

    python3 bench/kernelbench_sizes.py --out DIR [--mode ranked]

Writes KernelBench-format problem files (Model, get_inputs, get_init_inputs, the published
sizes as top-level constants; written here, not copied), imports them with `gpuarena import
kernelbench`, and judges an honest ModelNew for each at the `kernelbench` workload, while
nvidia-smi is read every 0.2 s for the GPU's used memory. Each run's verdict, wall time and
peak memory go to DIR/kernelbench-sizes.json and a Markdown table."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ELEMENTWISE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """{doc}"""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return {op}


batch_size = 4096
dim = 393216


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
'''

SOLUTION = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {op}
"""

PROBLEMS = {
    # file name: (what it computes, the reference's op, an honest solution's op)
    "23_Softmax.py": ("Softmax over dim 1.", "torch.softmax(x, dim=1)", "torch.nn.functional.softmax(x, dim=1)"),
    "26_GELU_.py": ("GELU.", "torch.nn.functional.gelu(x)", "torch.nn.functional.gelu(x)"),
}


def used_mib() -> int:
    done = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
    )
    return int(done.stdout.split()[0]) if done.returncode == 0 and done.stdout.strip() else -1


def judge(problem: Path, solution: Path, mode: str, limit_s: float) -> dict:
    peak, stop = [used_mib()], threading.Event()
    before = peak[0]

    def poll() -> None:
        while not stop.is_set():
            peak.append(used_mib())
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = time.monotonic()
    command = [sys.executable, "-m", "gpuarena.cli", "run", str(problem), str(solution), "--device", "cuda"]
    command += ["--mode", mode, "--workload", "kernelbench", "--json"]
    try:  # its progress lines go to stderr, this script's log: a run cut short shows where it was
        stdout = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=limit_s).stdout
    except subprocess.TimeoutExpired:
        stdout = json.dumps({"status": "NOT_FINISHED", "reason": f"no verdict within {limit_s:g} s"})
    wall = time.monotonic() - started
    stop.set()
    poller.join()
    try:
        record = json.loads(stdout)
    except json.JSONDecodeError:
        record = {"status": "NO_RECORD", "reason": stdout[-2000:]}
    workload = (record.get("workloads") or [{}])[0]
    return {
        "problem": problem.name,
        "status": record.get("status"),
        "reason": (record.get("reason") or "")[:500],
        "wall_s": round(wall, 1),
        "gpu_used_before_mib": before,
        "gpu_used_peak_mib": max(peak),
        "time_us": (workload.get("time") or {}).get("median_us"),
        "speedup": workload.get("speedup"),
        "float64_skipped": workload.get("float64_skipped"),
        "phases": record.get("phases"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", default="ranked")
    parser.add_argument("--limit", type=float, default=240, help="seconds a verdict may take")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="kb-sizes-"))
    (work / "level1").mkdir()
    for name, (doc, op, _) in PROBLEMS.items():
        (work / "level1" / name).write_text(ELEMENTWISE.format(doc=doc, op=op))
    imported = subprocess.run(
        [sys.executable, "-m", "gpuarena.cli", "import", "kernelbench", str(work / "level1"), "-o", str(work / "p")],
        capture_output=True,
        text=True,
    )
    print(imported.stdout[-2000:], imported.stderr[-2000:])
    results = []
    for name, (_, _, solution_op) in PROBLEMS.items():
        solution = work / f"new_{name}"
        solution.write_text(SOLUTION.format(op=solution_op))
        folder = next((work / "p" / "level1").glob(name.removesuffix(".py").lower().rstrip("_") + "*"))
        result = judge(folder, solution, args.mode, args.limit)
        print(json.dumps({k: v for k, v in result.items() if k != "phases"}), flush=True)
        results.append(result)
    (args.out / "kernelbench-sizes.json").write_text(json.dumps(results, indent=2))
    lines = [
        "| problem | status | wall | GPU memory used: before / peak | time | speed-up |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['problem']} | {r['status']} | {r['wall_s']} s | {r['gpu_used_before_mib']} / {r['gpu_used_peak_mib']} MiB"
            f" | {r['time_us']} µs | {r['speedup']} |"
        )
    (args.out / "kernelbench-sizes.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["status"] == "PASSED" for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
