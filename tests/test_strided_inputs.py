"""Inputs a problem draws strided reach the solution, and are timed, with that layout (issue 48):
the harness's shared buffers were all contiguous, so SegFormer's channels_last upsample was timed
on a contiguous copy, 11x slower on an H200 than in the model. A channels_last image, a
transposed weight and a row broadcast along a dimension (stride 0) keep their strides in the
supervisor's shared buffers and in the worker's view of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.session import WorkloadSession
from gpuarena.harness.transport import SharedArena, attach, storage_numel
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

FIXTURE = Path(__file__).parent / "fixtures" / "strided_inputs"

SEES_THE_LAYOUT = """import torch


def solve(image, weight_t, row):
    assert image.is_contiguous(memory_format=torch.channels_last) and not image.is_contiguous(), image.stride()
    assert weight_t.stride() == (1, weight_t.shape[0]), weight_t.stride()
    assert row.stride()[0] == 0, row.stride()
    flat = image.permute(0, 2, 3, 1).reshape(-1, image.shape[1])
    return image * 2 + 1, (flat + row[:1]) @ weight_t
"""


def _session(arena: SharedArena) -> WorkloadSession:
    problem = load_problem(FIXTURE)
    return WorkloadSession(problem, problem.spec.workloads[0], torch.device("cpu"), 1234, arena=arena)


@pytest.mark.quick
def test_shared_input_buffers_keep_a_drawn_input_s_strides_and_the_worker_sees_them(tmp_path):
    arena = SharedArena(torch.device("cpu"))
    try:
        session = _session(arena)
        example = session.make("timing", 0, 0)
        ref = session.problem.reference(**example)
        session.allocate(example, tuple(ref), n_sets=2, n_checks=1)
        for k in range(2):
            session.fill(k, session.make("timing", 1, k), "timing", 1, k)
        fds = arena.take_fds()  # the descriptors a request carries (the worker's own copies)
        for k in range(2):
            for name, shared in session.sets[k].items():
                drawn = session.private[k][name]
                assert shared.stride() == drawn.stride() and torch.equal(shared, drawn), name
                seen = attach(session.handles["sets"][k][name], fds)  # what the worker maps
                assert seen.stride() == drawn.stride() and torch.equal(seen, drawn), name
        assert session.modified_input() is None
        session.sets[1]["row"][3, 2] += 1  # one element of the broadcast row: every row sees it
        assert session.modified_input() == "row"
        # the buffer of a broadcast row is one row, of a channels_last image the image
        assert storage_numel(example["row"]) == example["row"].shape[1]
        assert storage_numel(example["image"]) == example["image"].numel()
    finally:
        arena.close()


@pytest.mark.harness
def test_a_solution_is_handed_and_timed_on_the_inputs_layout(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text(SEES_THE_LAYOUT)
    record = evaluate(
        load_problem(FIXTURE), load_solution(path), RunOptions(device="cpu", mode="benchmark", budget_s=0.3)
    )
    assert record.status.value == "PASSED", record.reason
    assert record.workloads[0].time is not None
