"""Honest: exp(log_softmax(x)), a different rounding path to the same values."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    return torch.log_softmax(x.float(), dim=-1).exp().to(x.dtype)
