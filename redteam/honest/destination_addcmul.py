"""Honest, destination-passing (y = a * x + b written into the given y): one addcmul
with out=y, timed."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "tests/fixtures/problems/axpy_dest"
WORKLOADS = ["n4096"]


def solve(a, x, b, y):
    torch.addcmul(b, a, x, out=y)
