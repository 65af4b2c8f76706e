"""The precision policy (harness/precision.py): every record gives both sides' error against a
float64 computation, and a problem can ask for faithful math in a dtype."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from conftest import judge
from gpuarena.harness import precision
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

ROOT = Path(__file__).resolve().parents[1]
TF32_LIKE = ROOT / "redteam" / "exploits" / "precision" / "tf32_like_inputs_for_float32.py"
BLOCKED = ROOT / "redteam" / "honest" / "matmul_k_blocked.py"


def test_a_reference_that_casts_to_float32_still_runs_in_float64():
    def reference(a, b):
        return torch.matmul(a.float(), b.to(torch.float32)).to(a.dtype)

    a, b = torch.randn(8, 16), torch.randn(16, 4)
    (exact,) = precision.float64_reference(reference, {"a": a, "b": b})
    assert exact.dtype == torch.float64
    assert torch.allclose(exact, a.double() @ b.double(), rtol=0, atol=1e-12)


@pytest.mark.harness
def test_records_carry_both_errors_against_float64(softmax_small):
    record = softmax_small(ROOT / "examples" / "softmax" / "pytorch.py", mode="test")
    workload = record.workloads[0]
    assert record.status == "PASSED"
    assert 0 <= workload.error_vs_float64 < 1e-5 and 0 < workload.reference_error_vs_float64 < 1e-5


@pytest.mark.harness
def test_faithful_float32_rejects_tf32_like_inputs_and_passes_honest_orderings():
    record = judge("level1/matmul", TF32_LIKE, mode="test", workloads=["small-128x256x192"])
    assert record.status == "WRONG_VALUES"
    assert "lower precision than asked" in record.reason and "faithful math" in record.reason
    honest = judge("level1/matmul", BLOCKED, mode="test")
    assert honest.status == "PASSED", honest.reason
    for w in honest.workloads:
        assert w.error_vs_float64 <= precision.FAITHFUL_FACTOR * w.reference_error_vs_float64


@pytest.mark.harness
def test_without_the_setting_the_elementwise_tolerance_alone_judges(tmp_path):
    folder = tmp_path / "matmul"
    shutil.copytree(ROOT / "problems" / "level1" / "matmul", folder)
    toml = folder / "problem.toml"
    toml.write_text(toml.read_text().replace('faithful_dtypes = ["float32"]', ""))
    options = RunOptions(device="cpu", mode="test", timeout_s=60, workloads=["small-128x256x192"])
    record = evaluate(load_problem(folder), load_solution(TF32_LIKE), options)
    assert record.status == "PASSED", record.reason
    workload = record.workloads[0]
    assert workload.error_vs_float64 > 100 * workload.reference_error_vs_float64  # in the record all the same


def test_the_faithful_rule_in_numbers():
    assert precision.unfaithful(1.5e-7, 2e-7) == ""
    assert precision.unfaithful(1.6e-6, 2e-7) == ""
    assert "faithful math" in precision.unfaithful(3e-4, 2e-7)


@pytest.mark.harness
def test_a_workload_too_large_to_widen_says_so_and_is_judged_by_its_tolerance(monkeypatch):
    """The float64 computation holds its inputs and outputs widened, plus the reference's own
    temporaries: past the device's allowance (KernelBench's 6.4 GB softmax) it is left out with
    the reason, and the elementwise tolerance alone judges, rather than the supervisor running
    out of memory."""
    from gpuarena.harness import correctness

    monkeypatch.setattr(correctness, "FLOAT64_LEAST", 1024)  # smaller than any workload's inputs
    record = judge("level1/matmul", BLOCKED, mode="test", workloads=["small-128x256x192"])
    assert record.status == "PASSED", record.reason
    workload = record.workloads[0]
    assert workload.float64_skipped.startswith("too large for a float64 computation here")
    assert workload.error_vs_float64 is None
