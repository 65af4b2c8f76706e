"""A problem written where it could not be checked (`unchecked = [...]` in problem.toml: an
importer's GPU-only problem on a machine without a GPU) is checked by its first run on such a
device, before anything is judged (problem_pending.py). A degenerate one gets an ERROR naming
the check's findings, never a verdict; a sound one is judged, and its pass is kept so that the
next run (or `gpuarena check` before it) does not check it again. Here the pending device is
the CPU, so the path a GPU machine takes runs in CI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuarena.contracts.status import Status
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.problem_pending import check_first, pending
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

DEGENERATE = (
    "import torch\n\n\ndef reference(a, x, b):\n    return torch.zeros_like(x)  # the same whatever the inputs\n"
)
RETURNS_AXPY = "def solve(a, x, b, y):\n    y.copy_(a * x + b)\n"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))


def unchecked_problem(tmp_path: Path, reference: str | None = None, device_type: str = "cpu") -> Path:
    """axpy_dest written unchecked on `device_type` (with another reference where given)."""
    folder = tmp_path / "axpy_unchecked"
    shutil.copytree(FIXTURES / "problems" / "axpy_dest", folder)
    toml = folder / "problem.toml"
    unchecked = f'name = "axpy_unchecked"\nunchecked = ["{device_type}"]'
    toml.write_text(toml.read_text().replace('name = "axpy_dest"', unchecked))
    if reference is not None:
        text = (folder / "reference.py").read_text()
        body = text[text.index("def make_inputs") :]
        (folder / "reference.py").write_text(reference + "\n\n" + body)
    return folder


def a_solution(tmp_path: Path):
    path = tmp_path / "axpy.py"
    path.write_text(RETURNS_AXPY)
    return load_solution(path)


def test_a_degenerate_unchecked_problem_gets_no_verdict_and_the_findings(tmp_path) -> None:
    problem = load_problem(unchecked_problem(tmp_path, DEGENERATE))
    record = check_first(problem, a_solution(tmp_path), "cpu", "ranked")
    assert record is not None and record.status == Status.ERROR
    assert "had not passed `gpuarena check` on cpu" in record.reason and "constant" in record.reason
    assert pending(problem, "cpu")  # a failure is not kept: the next run checks again


def test_a_sound_unchecked_problem_is_checked_once_then_judged(tmp_path, monkeypatch) -> None:
    folder = unchecked_problem(tmp_path)
    problem = load_problem(folder)
    assert pending(problem, "cpu") and not pending(problem, "cuda")  # only where it is marked
    assert check_first(problem, a_solution(tmp_path), "cpu", "test") is None
    assert not pending(problem, "cpu")
    import gpuarena.harness.problem_pending as module

    monkeypatch.setattr(module, "check_problem", lambda *_: pytest.fail("checked a second time"))
    assert check_first(problem, a_solution(tmp_path), "cpu", "test") is None
    (folder / "problem.toml").write_text((folder / "problem.toml").read_text() + "\n# changed\n")
    assert pending(load_problem(folder), "cpu")  # another version of the problem: checked again


def test_every_path_into_the_judge_checks_first(tmp_path) -> None:
    """evaluate() itself takes the check, so the warm path (run-many, run-stdin), the suite and
    the red-team corpus do too, not only `gpuarena run` and a runner's job."""
    problem = load_problem(unchecked_problem(tmp_path, DEGENERATE))
    seen: list[str] = []
    record = evaluate(problem, a_solution(tmp_path), RunOptions(device="cpu", mode="test"), progress=seen.append)
    assert record.status == Status.ERROR and "constant" in record.reason
    assert seen == [f"checking {problem.id} on cpu first: it was written where it could not be"]


@pytest.mark.harness  # a warm judge's process
def test_the_warm_path_checks_first(tmp_path) -> None:
    bad = unchecked_problem(tmp_path / "bad", DEGENERATE)
    solution = tmp_path / "axpy.py"
    solution.write_text(RETURNS_AXPY)
    env = {"GPUARENA_CACHE": str(tmp_path / "cache")}
    run = [sys.executable, "-m", "gpuarena", "run-many", str(bad), str(solution), "--device", "cpu", "--mode", "test"]
    done = subprocess.run([*run, "--jsonl"], capture_output=True, text=True, env=_env(env), timeout=300)
    answer = json.loads(done.stdout.splitlines()[0])
    assert done.returncode == 1 and answer["status"] == "ERROR", done.stdout + done.stderr


@pytest.mark.harness  # two CLI processes
def test_the_command_line_checks_first_and_gpuarena_check_counts(tmp_path) -> None:
    bad = unchecked_problem(tmp_path / "bad", DEGENERATE)
    solution = tmp_path / "axpy.py"
    solution.write_text(RETURNS_AXPY)
    env = {"GPUARENA_CACHE": str(tmp_path / "cache")}
    run = [sys.executable, "-m", "gpuarena", "run", str(bad), str(solution), "--device", "cpu", "--mode", "test"]
    done = subprocess.run([*run, "--json"], capture_output=True, text=True, env=_env(env), timeout=300)
    record = json.loads(done.stdout)
    assert done.returncode == 1 and record["status"] == "ERROR" and "constant" in record["reason"]
    good = unchecked_problem(tmp_path / "good")
    checked = subprocess.run(
        [sys.executable, "-m", "gpuarena", "check", str(good), "--device", "cpu"],
        capture_output=True,
        text=True,
        env=_env(env),
        timeout=300,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert not pending(load_problem(good), "cpu")  # `gpuarena check` passing there counts


def _env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra}
