"""Honest: runs the garbage collector on every call (some libraries do); it must not be
taken for tampering."""

import gc

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    gc.collect()
    return torch.softmax(x, dim=-1)
