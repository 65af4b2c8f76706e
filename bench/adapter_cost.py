"""What each importer's adapter bills to a solution: a solution identical to the reference, run
unmodified through the adapter of its own format, must score 1.0 (issue 49: GPU MODE's own
`A + B` scored 0.48x against the identical reference on the CPU; the adapter's closures kept
every call's outputs alive until the collector ran, never inside a timed block).

For each format, the problem is imported with gpuarena's own importer from the test fixtures
(written for gpuarena's tests), and a solution in that format whose body is the reference's is
run with `gpuarena run --mode benchmark`, in a process of its own, `--repeat` times; the
scores (the weighted geometric mean of the speed-ups) and each timed workload's speed-up are
recorded. A score within the runs' own spread of 1.0 means the adapter costs the solution
nothing the reference's side does not pay.

    python bench/adapter_cost.py --device cpu --repeat 3 --out bench/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "interop" / "fixtures"

GPUMODE_SUBMISSION = """\
from task import input_t, output_t


def custom_kernel(data: input_t) -> output_t:
    a, b, c = data  # the task's ref_kernel, word for word
    c.copy_(a + b)
    return c
"""

FLASHINFER_SOLUTION = {
    "name": "rmsnorm_as_the_reference",
    "definition": "rmsnorm_h256",
    "description": "The definition's own reference, as a solution.",
    "author": "gpuarena-bench",
    "spec": {
        "language": "python",
        "target_hardware": ["cpu", "cuda"],
        "entry_point": "main.py::run",
        "dependencies": ["torch"],
        "destination_passing_style": False,
    },
    "sources": [],
}


def gpuarena(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuarena", *args], capture_output=True, text=True, cwd=ROOT)


def _checked(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def prepare(work: Path) -> dict[str, tuple[Path, Path]]:
    """format -> (problem folder, solution identical to its reference), imported afresh."""
    cases: dict[str, tuple[Path, Path]] = {}
    _checked(
        gpuarena("import", "gpumode", str(FIXTURES / "gpumode" / "vectoradd_py"), "-o", str(work / "gm")), "gpumode"
    )
    (work / "gm_submission.py").write_text(GPUMODE_SUBMISSION)
    cases["gpumode"] = (work / "gm" / "level1" / "vectoradd_py", work / "gm_submission.py")

    model = FIXTURES / "kernelbench" / "level1" / "1_Matmul_Rectangular.py"
    _checked(gpuarena("import", "kernelbench", str(model), "-o", str(work / "kb"), "--level", "1"), "kernelbench")
    problem = next((work / "kb").rglob("problem.toml")).parent
    (work / "kb_model_new.py").write_text(model.read_text() + "\n\nclass ModelNew(Model):\n    pass\n")
    cases["kernelbench"] = (problem, work / "kb_model_new.py")

    definition = FIXTURES / "rmsnorm_h256" / "definition.json"
    _checked(
        gpuarena(
            "import",
            "flashinfer",
            str(definition),
            "-w",
            str(definition.parent / "workloads.jsonl"),
            "-o",
            str(work / "fi"),
            "--convention",
            "return",
        ),
        "flashinfer",
    )
    solution = dict(FLASHINFER_SOLUTION)
    solution["sources"] = [{"path": "main.py", "content": json.loads(definition.read_text())["reference"]}]
    (work / "fi_solution.json").write_text(json.dumps(solution))
    _checked(
        gpuarena(
            "import",
            "flashinfer-solution",
            str(work / "fi_solution.json"),
            "--problem",
            str(work / "fi"),
            "-o",
            str(work / "fi_solution"),
        ),
        "flashinfer-solution",
    )
    cases["flashinfer"] = (work / "fi", work / "fi_solution")
    return cases


def run_once(problem: Path, solution: Path, device: str) -> dict:
    done = gpuarena("run", str(problem), str(solution), "--device", device, "--mode", "benchmark", "--json")
    _checked(done, f"run {problem.name}")
    record = json.loads(done.stdout)
    return {
        "status": record["status"],
        "score": record.get("score"),
        "speedups": {w["name"]: w.get("speedup") for w in record["workloads"] if w.get("speedup") is not None},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases = prepare(Path(tmp))
        results = {}
        for fmt, (problem, solution) in cases.items():
            runs = [run_once(problem, solution, args.device) for _ in range(args.repeat)]
            scores = [r["score"] for r in runs if r["score"] is not None]
            results[fmt] = {
                "problem": problem.name,
                "runs": runs,
                "median_score": statistics.median(scores) if scores else None,
            }
            print(f"{fmt}: scores {[round(s, 3) for s in scores]}", flush=True)
    machine = "cpu-vm" if args.device == "cpu" else args.device
    stamp = datetime.date.today().isoformat()
    command = "python bench/adapter_cost.py " + " ".join(sys.argv[1:])
    out = {"command": command, "device": args.device, "host": platform.node(), "date": stamp, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"adapter-cost-{machine}-{stamp}.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
