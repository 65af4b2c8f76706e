"""Honest: elementwise add (level1/add) with torch.add into a fresh tensor, timed."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "level1/add"
WORKLOADS = ["small-64k"]


def solve(a, b):
    return torch.add(a, b)
