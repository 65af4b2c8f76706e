"""Honest: spends two milliseconds on the host in every call before it launches its one small
kernel (a Python-side cache lookup, a tokenizer, a slow dispatcher), so its GPU work comes
milliseconds after the harness's cache sweep instead of right behind it. The device audit
must take the harness's share off as the solution's calls space it out (the no-op twin waits
as long), not as a back-to-back loop would show it."""

import time

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    until = time.perf_counter() + 0.002
    while time.perf_counter() < until:
        pass
    return torch.softmax(x, dim=-1)
