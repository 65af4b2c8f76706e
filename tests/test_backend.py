"""The device backend: the CPU and NVIDIA GPUs are judged; a PyTorch built for another vendor
(it still answers to "cuda") is refused before a run starts, with the gap named."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness.backend import CPU, NVIDIA, UnsupportedDevice, backend_for
from gpuarena.harness.supervisor import RunOptions, evaluate
from gpuarena.problems import resolve_problem
from gpuarena.solutions.loader import load_solution
from tests.conftest import EXAMPLES


def test_the_cpu_and_an_nvidia_build_have_their_backends(monkeypatch) -> None:
    assert backend_for(torch.device("cpu")) is CPU
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert backend_for(torch.device("cuda")) is NVIDIA and NVIDIA.timer == "cupti-device-time"


def test_a_rocm_build_is_refused_with_the_gap_named(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.2.41133", raising=False)
    with pytest.raises(UnsupportedDevice, match=r"built for ROCm \(HIP 6.2.41133\).*no ROCm backend yet"):
        backend_for(torch.device("cuda"))
    with pytest.raises(UnsupportedDevice, match="ROCm"):  # at the harness's door, before any worker starts
        evaluate(resolve_problem("level1/softmax"), load_solution(EXAMPLES / "softmax" / "pytorch.py"),
                 RunOptions(device="cuda"))


def test_a_build_without_cuda_that_answers_to_cuda_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(UnsupportedDevice, match="not built with CUDA"):
        backend_for(torch.device("cuda"))
