"""Honest: torch.softmax with an explicit accumulation dtype (float64), cast back."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    return torch.softmax(x, dim=-1, dtype=torch.float64).to(x.dtype)
