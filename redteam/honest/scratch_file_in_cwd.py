"""Honest: writes and reads back a scratch file in its working directory on each call
(a kernel cache on disk, say)."""

import os

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]


def solve(x):
    path = os.path.join(os.getcwd(), "scratch.pt")
    torch.save(torch.softmax(x, dim=-1), path)
    return torch.load(path)
