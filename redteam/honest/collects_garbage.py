"""Honest: runs the garbage collector on every call (some libraries do); it must not be
taken for tampering."""

import gc

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]
# its own calls are slow by design (about 40 ms of collection a call on an H200): the device audit's
# 12 requests of 64 calls and its unswept requests took 25-35 s at stops 58 and 62 and 60.3 s at
# stop 66 (redteam-cuda-2026-12-01-stop66-part-0-of-2.json), at the default limit of 60
TIMEOUT = 150


def solve(x):
    gc.collect()
    return torch.softmax(x, dim=-1)
