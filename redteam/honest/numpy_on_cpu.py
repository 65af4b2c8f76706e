"""Honest: computes with numpy on the CPU (zero-copy views of the shared input) and
returns a new torch tensor."""

import numpy as np
import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
DEVICES = ["cpu"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    a = x.numpy()
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return torch.from_numpy(e)
