"""Honest: a module-level cache of legitimate constants (log2(e), a block size table
computed at import), used by every call."""

import math

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]

LOG2E = 1.0 / math.log(2.0)
BLOCKS = {n: 1 << max(0, (n - 1).bit_length()) for n in range(1, 8193)}


def solve(x):
    block = BLOCKS[x.shape[-1]]
    assert block >= x.shape[-1]
    t = (x - x.amax(dim=-1, keepdim=True)) * LOG2E
    e = torch.exp2(t)
    return e / e.sum(dim=-1, keepdim=True)
