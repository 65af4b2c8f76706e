"""One problem, both calling conventions (issue 49): a solution may say in its solution.toml
how it hands back its outputs (`convention = "return"` or `"destination"`), and the harness
calls it that way on a problem of either convention: destinations are passed (poisoned) to a
destination-passing solution and read back, a value-returning one's outputs are taken as
returned. Before, a solution had to be written in its problem's convention, and FlashInfer-
Bench's C++/CUDA solutions in the other convention could not be imported at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from conftest import judge
from gpuarena.solutions.loader import load_solution
from gpuarena.solutions.model import SolutionManifest


def solution(folder: Path, code: str, convention: str | None) -> Path:
    folder.mkdir()
    (folder / "sol.py").write_text(code)
    line = f'convention = "{convention}"\n' if convention else ""
    (folder / "solution.toml").write_text(f'language = "pytorch"\nentry_point = "sol.py:solve"\n{line}')
    return folder


WRITES_SOFTMAX = "import torch\n\n\ndef solve(x, y):\n    torch.softmax(x, dim=-1, out=y)\n"
RETURNS_AXPY = "def solve(a, x, b):\n    return b + a * x\n"


@pytest.mark.harness
def test_a_destination_passing_solution_of_a_value_returning_problem_passes_ranked(tmp_path) -> None:
    folder = solution(tmp_path / "dps", WRITES_SOFTMAX, "destination")
    record = judge("level1/softmax", folder, workloads=["small-64x1000"], mode="ranked", budget_s=0.5)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert record.workloads[0].speedup is not None


@pytest.mark.harness
def test_a_value_returning_solution_of_a_destination_problem_passes(tmp_path) -> None:
    folder = solution(tmp_path / "returns", RETURNS_AXPY, "return")
    record = judge("axpy_dest", folder)
    assert record.status == "PASSED", record.reason + record.log[-2000:]


@pytest.mark.harness
def test_the_destinations_are_read_back_so_one_left_alone_is_wrong(tmp_path) -> None:
    folder = solution(tmp_path / "idle", "def solve(x, y):\n    pass\n", "destination")
    record = judge("level1/softmax", folder, workloads=["small-64x1000"])
    assert record.status == "WRONG_VALUES", record.reason


@pytest.mark.harness
def test_a_solution_in_the_problems_convention_without_saying_so_is_called_as_before(tmp_path) -> None:
    """Left out, the convention is the problem's: the value-returning axpy on a destination
    problem is called with a destination it does not take."""
    folder = solution(tmp_path / "unsaid", RETURNS_AXPY, None)
    record = judge("axpy_dest", folder)
    assert record.status != "PASSED"
    assert "y" in record.reason


def test_the_convention_is_part_of_the_solution_only_when_given(tmp_path) -> None:
    said = load_solution(solution(tmp_path / "said", RETURNS_AXPY, "return"))
    unsaid = load_solution(solution(tmp_path / "unsaid", RETURNS_AXPY, None))
    assert said.manifest.convention == "return" and unsaid.manifest.convention is None
    assert said.hash != unsaid.hash  # another way of calling it is another solution
    assert unsaid.manifest.convention_for("destination") == "destination"
    with pytest.raises(ValidationError, match="cannot take destinations"):
        SolutionManifest(language="jax", entry_point="sol.py:solve", convention="destination")
    with pytest.raises(ValidationError):
        SolutionManifest(language="pytorch", entry_point="sol.py:solve", convention="inout")  # type: ignore[arg-type]
