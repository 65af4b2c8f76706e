"""Honest: exp(x - logsumexp(x)), one fused normaliser."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    return torch.exp(x - torch.logsumexp(x, dim=-1, keepdim=True))
