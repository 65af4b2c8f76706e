"""Honest: returns its single output inside a one-element tuple."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    return (torch.softmax(x, dim=-1),)
