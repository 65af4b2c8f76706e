"""The check after each timed request that no input changed (WorkloadSession.modified_input): one
bit of one input of one set is enough, whether the input is compared on the device without
waiting (small ones) or with torch.equal (large ones)."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness import session as session_module
from gpuarena.harness.session import WorkloadSession
from gpuarena.problems import resolve_problem


@pytest.fixture
def session() -> WorkloadSession:
    problem = resolve_problem("level1/add")
    workload = problem.spec.workloads[0]
    s = WorkloadSession(problem, workload, torch.device("cpu"), 1234, arena=None)
    s.private = [s.make("round", 0, k) for k in range(4)]
    s.sets = [{name: value.clone() for name, value in inputs.items()} for inputs in s.private]
    return s


@pytest.mark.parametrize("queued_bytes", [session_module.QUEUED_COMPARISON_BYTES, 0], ids=["queued", "torch.equal"])
def test_one_bit_of_one_input_of_one_set_is_seen(session, monkeypatch, queued_bytes):
    monkeypatch.setattr(session_module, "QUEUED_COMPARISON_BYTES", queued_bytes)
    assert session.modified_input() is None
    name = list(session.private[2])[1]
    session.sets[2][name].view(torch.int32)[17] ^= 1  # the lowest bit of one element
    assert session.modified_input() == name


def test_a_negative_zero_for_a_zero_is_a_change(session):
    """Bitwise, not by value: -0.0 == 0.0, yet the input was written."""
    name = list(session.private[0])[0]
    session.private[0][name][5] = 0.0
    session.sets[0][name][5] = -0.0
    assert session.modified_input() == name
