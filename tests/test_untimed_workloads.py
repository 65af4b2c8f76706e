"""Workloads judged for correctness only (`timed = false`): a peer's tests, as its own
evaluation uses them, are checked in every mode and never timed, audited or scored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.harness


def _add_with_an_untimed_workload(tmp_path: Path) -> Path:
    folder = tmp_path / "add"
    shutil.copytree(ROOT / "problems" / "level1" / "add", folder)
    toml = folder / "problem.toml"
    text = toml.read_text()
    marked = text.replace('name = "small-64k"\n', 'name = "small-64k"\ntimed = false\n', 1)
    assert marked != text
    toml.write_text(marked)
    return folder


def test_an_untimed_workload_is_checked_but_neither_timed_nor_scored(tmp_path):
    problem = load_problem(_add_with_an_untimed_workload(tmp_path))
    assert [w.timed for w in problem.spec.workloads[:2]] == [False, True]
    options = RunOptions(
        device="cpu", mode="benchmark", timeout_s=120, workloads=["small-64k", "small-1m"], budget_s=0.2
    )
    honest = tmp_path / "honest.py"
    honest.write_text("import torch\n\ndef solve(a, b):\n    return torch.add(a, b)\n")
    record = evaluate(problem, load_solution(honest), options)
    assert record.status == "PASSED", record.reason
    untimed, timed = record.workloads
    assert untimed.trials > 0 and untimed.time is None and untimed.speedup is None
    assert timed.time is not None and timed.speedup is not None
    assert record.score == pytest.approx(timed.speedup)


def test_a_wrong_answer_on_an_untimed_workload_still_fails_the_run(tmp_path):
    problem = load_problem(_add_with_an_untimed_workload(tmp_path))
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import torch\n\ndef solve(a, b):\n    return a - b\n")
    options = RunOptions(
        device="cpu", mode="benchmark", timeout_s=120, workloads=["small-64k", "small-1m"], budget_s=0.2
    )
    record = evaluate(problem, load_solution(wrong), options)
    assert record.status == "WRONG_VALUES"
    assert record.workloads[0].name == "small-64k" and record.workloads[0].status == "WRONG_VALUES"
