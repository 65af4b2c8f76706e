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


def _add_with_many_tests(tmp_path: Path, count: int) -> Path:
    """level1/add with `count` more correctness-only workloads on the CPU (a peer's tests)."""
    folder = tmp_path / f"add-{count}-tests"
    shutil.copytree(ROOT / "problems" / "level1" / "add", folder)
    tests = "".join(
        f'\n[[workloads]]\nname = "test{i}"\naxes = {{ n = {1000 + i} }}\ndtype = "float32"\n'
        'timed = false\ndevices = ["cpu", "cuda"]\n'
        for i in range(count)
    )
    (folder / "problem.toml").write_text((folder / "problem.toml").read_text() + tests)
    return folder


RIGHT_ONCE = """import torch

calls = [0]

def solve(a, b):
    calls[0] += 1
    return torch.add(a, b) if calls[0] == 1 else torch.add(a, b) * 0.5
"""


def test_many_correctness_only_workloads_share_the_trials_and_still_catch_a_later_wrong_call(tmp_path):
    """A run's correctness-only workloads share trials x SHARED_BY draws (correctness.trials_for):
    twelve tests get one trial each, three get three; a solution right on its first call only
    still fails, on the second test."""
    from gpuarena.harness.correctness import SHARED_BY, trials_for

    assert [trials_for(3, False, n) for n in (1, 4, 5, 6, 12, 52)] == [3, 3, 3, 2, 1, 1]
    assert trials_for(3, True, 52) == 1 and SHARED_BY == 4
    honest = tmp_path / "honest.py"
    honest.write_text("import torch\n\ndef solve(a, b):\n    return torch.add(a, b)\n")
    folders = {count: _add_with_many_tests(tmp_path, count) for count in (12, 3)}
    for count, each in ((12, 1), (3, 3)):
        problem = load_problem(folders[count])
        names = [f"test{i}" for i in range(count)]
        options = RunOptions(device="cpu", mode="test", timeout_s=120, workloads=names)
        record = evaluate(problem, load_solution(honest), options)
        assert record.status == "PASSED", record.reason
        assert [w.trials for w in record.workloads] == [each] * count
    once = tmp_path / "right_once.py"
    once.write_text(RIGHT_ONCE)
    problem = load_problem(folders[12])
    options = RunOptions(device="cpu", mode="test", timeout_s=120, workloads=[f"test{i}" for i in range(12)])
    record = evaluate(problem, load_solution(once), options)
    assert record.status == "WRONG_VALUES" and record.workloads[1].status == "WRONG_VALUES", record.reason
