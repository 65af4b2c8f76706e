"""Many verdicts from one process (harness/evaluator.py, `gpuarena run-many`, `gpuarena
run-stdin`): answers in order, bad requests answered with an error and nothing lost, workers
started ahead kept alive across jobs, and nothing of one solution reaching the next."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLES
from gpuarena.harness.evaluator import Evaluator
from gpuarena.harness.supervisor import RunOptions
from gpuarena.problems import resolve_problem
from gpuarena.solutions import load_solution

REPO = Path(__file__).resolve().parents[1]
PYTORCH = EXAMPLES / "softmax" / "pytorch.py"

# leaves what it can in its worker: a module attribute, an environment variable, a file in
# /tmp and one in its home; the next solution answers with zeros if it finds any of them
LEAVES = """
import os, pathlib, torch
torch._gpuarena_left_behind = True
os.environ["GPUARENA_LEFT_BEHIND"] = "1"
pathlib.Path("/tmp/gpuarena-left-behind").write_text("x")
pathlib.Path(os.path.expanduser("~/gpuarena-left-behind")).write_text("x")

def solve(x):
    return torch.softmax(x, dim=-1)
"""
LOOKS = """
import os, pathlib, torch
FOUND = (hasattr(torch, "_gpuarena_left_behind") or "GPUARENA_LEFT_BEHIND" in os.environ
         or pathlib.Path("/tmp/gpuarena-left-behind").exists()
         or pathlib.Path(os.path.expanduser("~/gpuarena-left-behind")).exists())

def solve(x):
    return torch.zeros_like(x) if FOUND else torch.softmax(x, dim=-1)
"""


def gpuarena(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.e2e
def test_run_stdin_answers_every_line_in_order_and_bad_ones_with_an_error(tmp_path):
    requests = [
        {
            "id": "a",
            "problem": "level1/softmax",
            "solution": str(PYTORCH),
            "mode": "test",
            "workloads": ["small-64x1000"],
        },
        "this is not JSON",
        {"id": "b", "problem": "level1/softmax"},
        {"id": "c", "problem": "level1/softmax", "solution": str(PYTORCH), "workloads": ["no-such-workload"]},
        {"id": "d", "problem": "no/such-problem", "solution": str(PYTORCH)},
        {"id": "e", "problem": "level1/softmax", "solution": str(PYTORCH), "mode": "fast"},
        {
            "id": "f",
            "problem": "level1/softmax",
            "solution": str(REPO / "tests/fixtures/solutions/returns_nan.py"),
            "mode": "test",
            "workloads": ["small-64x1000"],
        },
    ]
    lines = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in requests) + "\n"
    done = gpuarena("run-stdin", "--device", "cpu", stdin=lines)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == ["a", None, "b", "c", "d", "e", "f"]
    assert answers[0]["status"] == "PASSED" and answers[0]["record"]["problem"] == "level1/softmax"
    assert "not JSON" in answers[1]["error"]
    assert "solution" in answers[2]["error"]
    assert "no-such-workload" in answers[3]["error"]
    assert "no/such-problem" in answers[4]["error"]
    assert "test, benchmark or ranked" in answers[5]["error"]
    assert answers[6]["status"] == "WRONG_VALUES"


@pytest.mark.e2e
def test_run_many_gives_each_solution_a_worker_of_its_own(tmp_path):
    leaves, looks = tmp_path / "leaves.py", tmp_path / "looks.py"
    leaves.write_text(LEAVES)
    looks.write_text(LOOKS)
    done = gpuarena(
        "run-many",
        "level1/softmax",
        str(leaves),
        str(looks),
        str(PYTORCH),
        "--device",
        "cpu",
        "--mode",
        "test",
        "--workload",
        "small-64x1000",
        "--jsonl",
    )
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["status"] for a in answers] == ["PASSED", "PASSED", "PASSED"], [
        a.get("record", {}).get("reason") for a in answers
    ]
    assert done.returncode == 0
    broken = gpuarena(
        "run-many",
        "level1/softmax",
        str(PYTORCH),
        str(tmp_path / "missing.py"),
        "--device",
        "cpu",
        "--mode",
        "test",
        "--workload",
        "small-64x1000",
    )
    assert broken.returncode == 1 and "PASSED" in broken.stdout and "not found" in broken.stdout


@pytest.mark.harness
def test_workers_started_ahead_outlive_the_job_that_started_them():
    """Closing a run's worker kills its orphans (processes handed to the supervisor): not the
    next run's worker, started while it ran."""
    problem, solution = resolve_problem("level1/softmax"), load_solution(PYTORCH)
    options = RunOptions(device="cpu", mode="test", workloads=["small-64x1000"])
    with Evaluator("cpu", ahead=2) as evaluator:
        for _ in range(2):
            assert evaluator.judge(problem, solution, options).status == "PASSED"
            assert len(evaluator._waiting) == 2 and all(w.alive() for w in evaluator._waiting)
    assert not evaluator._waiting
