"""Honest: reseeds and draws from torch's global RNG on every call (e.g. a randomised
algorithm choice); the harness draws inputs from its own generators, so this changes
nothing."""

import random

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    torch.manual_seed(0)
    random.seed(0)
    chunk = 8 * (1 + int(torch.randint(0, 4, ()).item()))
    return torch.cat([torch.softmax(p, dim=-1) for p in x.split(chunk, dim=0)])
