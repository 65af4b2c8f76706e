"""Honest: processes the rows in chunks of 16 into a preallocated output (what a kernel
with a row-block grid does)."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    y = torch.empty_like(x)
    for start in range(0, x.shape[0], 16):
        y[start:start + 16] = torch.softmax(x[start:start + 16], dim=-1)
    return y
