"""Honest: runs a short helper process on the first call (a compiler probe, say) and
waits for it; no process outlives the call."""

import subprocess

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]

_probed = False


def solve(x):
    global _probed
    if not _probed:
        subprocess.run(["true"], check=True)
        _probed = True
    return torch.softmax(x, dim=-1)
