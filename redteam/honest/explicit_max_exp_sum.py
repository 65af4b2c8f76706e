"""Honest: softmax written out (row max, exp of the difference, row sum, divide) in
float32. Timed too: an ordinary solution must pass with an ordinary speedup.
"""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)
