"""Honest: works under torch.inference_mode() and returns an inference tensor (still
exactly torch.Tensor)."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


@torch.inference_mode()
def solve(x):
    return torch.softmax(x, dim=-1)
