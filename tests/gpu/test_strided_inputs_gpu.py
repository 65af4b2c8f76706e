"""Strided inputs on a GPU (issue 48): the supervisor's CUDA buffers of a channels_last image, a
transposed weight and a broadcast row keep their strides through the CUDA handles to the worker,
and a ranked run (timed and audited) of a solution that asserts those layouts passes:
`pytest -m gpu tests/gpu/test_strided_inputs_gpu.py`."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution
from test_strided_inputs import FIXTURE, SEES_THE_LAYOUT

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]


def test_a_ranked_cuda_run_hands_the_solution_the_inputs_layout(tmp_path):
    path = tmp_path / "solution.py"
    path.write_text(SEES_THE_LAYOUT)
    options = RunOptions(device="cuda", mode="ranked", budget_s=0.3)
    record = evaluate(load_problem(FIXTURE), load_solution(path), options)
    assert record.status.value == "PASSED", record.reason + record.log[-2000:]
    assert record.workloads[0].time is not None
