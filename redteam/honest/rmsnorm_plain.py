"""Honest: RMSNorm (level2/rmsnorm) in plain PyTorch, float32 math."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "level2/rmsnorm"
WORKLOADS = ["small-128x1024"]

EPS = 1e-6


def solve(x, weight):
    xf = x.float()
    inv = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf * inv * weight.float()).to(x.dtype)
