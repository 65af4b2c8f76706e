"""Honest: emits a Python warning on every call."""

import warnings

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    warnings.warn("this kernel is a placeholder", UserWarning)
    return torch.softmax(x, dim=-1)
