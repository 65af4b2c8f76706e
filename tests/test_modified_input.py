"""The check after each timed request that no input changed (WorkloadSession.modified_input): one
bit of one input of one set is enough, whether the input is compared on the device without
waiting (small ones) or with torch.equal (large ones)."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness import bitwise
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


@pytest.mark.parametrize("queued_bytes", [bitwise.QUEUED_COMPARISON_BYTES, 0], ids=["queued", "torch.equal"])
def test_one_bit_of_one_input_of_one_set_is_seen(session, monkeypatch, queued_bytes):
    monkeypatch.setattr(bitwise, "QUEUED_COMPARISON_BYTES", queued_bytes)
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


def test_a_refresh_lets_each_set_s_inputs_go_before_drawing_its_next(session, monkeypatch):
    """A round's refresh (measure.refresh_sets) never holds a set's old private inputs while it
    draws the new ones: with one set of 42 GiB drawn (DeepSeek-V3's MoE layer) that was twice what
    the memory plan counts, and the H200 ran out. Each new draw finds its own set's copy gone, the
    others' kept; after the refresh every set has its new inputs."""
    from gpuarena.harness import measure

    held_when_drawn: list[list[bool]] = []
    draw = session.make

    def make(*tag):
        held_when_drawn.append([bool(p) for p in session.private])
        return draw(*tag)

    monkeypatch.setattr(session, "make", make)
    session.dests = [[] for _ in session.sets]  # nothing to poison here
    before = [dict(p) for p in session.private]
    measure.refresh_sets(session, 7, "timing")
    assert held_when_drawn == [[k != j for k in range(4)] for j in range(4)]
    assert all(p and not torch.equal(p[n], b[n]) for p, b in zip(session.private, before) for n in p)
    assert session.modified_input() is None
