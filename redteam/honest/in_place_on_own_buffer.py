"""Honest: copies the input into its own buffer once, then does every step in place on
that buffer (sub_, exp_, div_): in-place work is fine when the buffer is the solution's."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    y = x.clone()
    y.sub_(y.amax(dim=-1, keepdim=True)).exp_()
    return y.div_(y.sum(dim=-1, keepdim=True))
