"""The softmax examples pass on the CPU: PyTorch directly, Triton through its interpreter."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, judge

pytestmark = pytest.mark.harness


def test_pytorch_softmax_passes_every_cpu_workload_with_timing():
    record = judge("level1/softmax", EXAMPLES / "softmax" / "pytorch.py", mode="benchmark")
    assert record.status == "PASSED", record.reason
    assert all(w.time and w.reference_time and w.speedup for w in record.workloads)
    assert record.score > 0


def test_triton_softmax_passes_under_the_interpreter(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    # timed on the small workload only: the interpreter runs each program in NumPy, and timing
    # 128 x 4096 ran past the 60 s limit on a slower 2-core VM; that one is checked, not timed
    timed = judge(
        "level1/softmax",
        EXAMPLES / "softmax" / "triton.py",
        mode="benchmark",
        budget_s=0.2,
        workloads=["small-64x1000"],
    )
    assert timed.status == "PASSED", timed.reason + timed.log[-2000:]
    assert timed.language == "triton" and all(w.time for w in timed.workloads)
    checked = judge("level1/softmax", EXAMPLES / "softmax" / "triton.py", mode="test")
    assert checked.status == "PASSED", checked.reason + checked.log[-2000:]
    assert {w.name for w in checked.workloads} == {"small-64x1000", "small-128x4096"}


def test_triton_add_passes_under_the_interpreter(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    record = judge("level1/add", EXAMPLES / "add" / "triton.py", mode="benchmark", budget_s=0.2)
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert {w.name for w in record.workloads} >= {"small-64k", "small-1m"}


def test_a_triton_solution_on_the_cpu_without_the_interpreter_is_told_how(monkeypatch):
    pytest.importorskip("triton")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    record = judge("level1/add", EXAMPLES / "add" / "triton.py", workloads=["small-64k"])
    assert record.status in ("RUNTIME_ERROR", "COMPILE_ERROR")
    assert "--device cuda, or on the CPU under TRITON_INTERPRET=1" in record.reason, record.reason
