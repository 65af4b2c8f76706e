"""Issue 49 on a GPU: a solution in the other calling convention than its problem's, and a
problem written where it could not be checked (`unchecked = ["cuda"]`), checked by its first
run on CUDA before anything is judged: `pytest -m gpu tests/gpu/test_conventions_gpu.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import judge
from gpuarena.harness.problem_pending import pending
from gpuarena.problems import load_problem
from test_problem_pending import DEGENERATE, unchecked_problem

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]

WRITES_SOFTMAX = "import torch\n\n\ndef solve(x, y):\n    torch.softmax(x, dim=-1, out=y)\n"
RETURNS_AXPY = "def solve(a, x, b):\n    return b + a * x\n"


def _solution(folder: Path, code: str, convention: str) -> Path:
    folder.mkdir()
    (folder / "sol.py").write_text(code)
    (folder / "solution.toml").write_text(
        f'language = "pytorch"\nentry_point = "sol.py:solve"\nconvention = "{convention}"\n'
    )
    return folder


def test_a_destination_passing_solution_of_a_value_returning_problem_passes_ranked_on_cuda(tmp_path):
    folder = _solution(tmp_path / "dps", WRITES_SOFTMAX, "destination")
    record = judge("level1/softmax", folder, device="cuda", workloads=["llama3-vocab-256"], mode="ranked", budget_s=0.5)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    audit = record.workloads[0].device_audit
    assert audit is not None and audit.claimed_us is not None, audit  # audited, with the solution's own harness twin


def test_a_value_returning_solution_of_a_destination_problem_passes_on_cuda(tmp_path):
    folder = _solution(tmp_path / "returns", RETURNS_AXPY, "return")
    record = judge("axpy_dest", folder, device="cuda", mode="benchmark", budget_s=0.5)
    assert record.status == "PASSED", record.reason + record.log[-2000:]


def test_an_unchecked_problem_is_checked_by_its_first_cuda_run(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    axpy = _solution(tmp_path / "axpy", "def solve(a, x, b, y):\n    y.copy_(a * x + b)\n", "destination")
    bad = judge(str(unchecked_problem(tmp_path / "bad", DEGENERATE, "cuda")), axpy, device="cuda", mode="test")
    assert bad.status == "ERROR" and "had not passed `gpuarena check` on cuda" in bad.reason
    good = unchecked_problem(tmp_path / "good", device_type="cuda")
    assert pending(load_problem(good), "cuda")
    record = judge(str(good), axpy, device="cuda", mode="test")
    assert record.status == "PASSED", record.reason
    assert not pending(load_problem(good), "cuda")  # checked once on this machine
