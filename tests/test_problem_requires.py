"""problem.toml's `requires` (ProblemSpec.requires): a problem whose reference needs a package
not installed here is checked and run to one line naming it, with nothing of the problem
imported (its reference.py raises if it ever is), and no verdict on the solution."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import gpuarena
from gpuarena.contracts.records import Status
from gpuarena.errors import FormatError
from gpuarena.harness.judge import evaluate
from gpuarena.harness.options import RunOptions
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

ROOT = Path(__file__).resolve().parents[1]
PROBLEM = (
    ROOT / "tests" / "fixtures" / "requires" / "requires_absent"
)  # not under fixtures/problems, which the service tests list
SOLUTION = ROOT / "tests" / "fixtures" / "solutions" / "same_as_reference.py"
LINE = (
    "requires `gpuarena_absent_vendor_kernels` (problem.toml `requires`), not installed here: nothing of the "
    "problem was run; run it on a machine where `gpuarena_absent_vendor_kernels` is installed"
)


def _gpuarena(*args: str) -> subprocess.CompletedProcess:
    return gpuarena(*args, env={"COLUMNS": "400"})  # wide enough that no line is wrapped


def test_check_stops_with_one_line_naming_the_package():
    report = check_problem(PROBLEM)
    assert report.errors == [f"{report.name} {LINE}"]


def test_a_run_is_an_error_of_the_harness_not_a_verdict_on_the_solution():
    problem = load_problem(PROBLEM)
    record = evaluate(problem, load_solution(SOLUTION), RunOptions(device="cpu", mode="test"))
    assert record.status == Status.ERROR
    assert record.reason == f"{problem.id} {LINE}"
    assert record.workloads == []


@pytest.mark.e2e
def test_the_cli_says_it_in_one_line_for_check_and_run():
    checked = _gpuarena("check", str(PROBLEM))
    assert checked.returncode == 1
    assert sum(LINE in line for line in checked.stdout.splitlines()) == 1, checked.stdout
    ran = _gpuarena("run", str(PROBLEM), str(SOLUTION), "--device", "cpu", "--mode", "test")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "ERROR" in ran.stdout and "COMPILE_ERROR" not in ran.stdout
    assert sum(LINE in line for line in ran.stdout.splitlines()) == 1, ran.stdout
    assert "Traceback" not in ran.stdout + ran.stderr


def test_an_installed_requirement_lets_the_problem_load(tmp_path):
    folder = tmp_path / "level1" / "needs_torch"
    folder.mkdir(parents=True)
    toml = (PROBLEM / "problem.toml").read_text().replace("gpuarena_absent_vendor_kernels", "torch")
    (folder / "problem.toml").write_text(toml.replace('name = "requires_absent"', 'name = "needs_torch"'))
    (folder / "reference.py").write_text(
        (PROBLEM / "reference.py").read_text().replace("raise RuntimeError", "_unused = RuntimeError")
    )
    problem = load_problem(folder)
    assert problem.spec.requires == ["torch"] and problem.spec.missing_packages() == []
    assert not any("requires" in e for e in check_problem(folder).errors)


@pytest.mark.parametrize("name", ["aiter.ops", "not a name", ""])
def test_requires_takes_top_level_import_names(tmp_path, name):
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "problem.toml").write_text(
        (PROBLEM / "problem.toml").read_text().replace('"gpuarena_absent_vendor_kernels"', repr(name))
    )
    (folder / "reference.py").write_text("")
    with pytest.raises(FormatError, match="requires"):
        load_problem(folder)
