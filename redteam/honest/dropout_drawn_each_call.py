"""Honest: on a problem that draws in its calls (dropout, `seeded_calls = true`), draws its mask
from torch's generator on every call, as the reference does, by another route (a mask of ones
through dropout, then a product): the harness seeds the generators before each call, its own
and the reference's alike, so the same draw gives the same mask, and the timed calls' outputs
are checked with that mask too."""

import torch
import torch.nn.functional as F

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "tests/fixtures/seeded/dropout_softmax"
WORKLOADS = ["rows64x512"]


def solve(x):
    mask = F.dropout(torch.ones_like(x), p=0.25, training=True)
    return torch.softmax(x * mask * 3, dim=-1)
