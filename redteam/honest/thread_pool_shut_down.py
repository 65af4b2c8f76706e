"""Honest: a ThreadPoolExecutor used as a context manager (shut down and joined on exit)
for each call."""

from concurrent.futures import ThreadPoolExecutor

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    with ThreadPoolExecutor(max_workers=2) as pool:
        parts = list(pool.map(lambda p: torch.softmax(p, dim=-1), x.chunk(4, dim=0)))
    return torch.cat(parts)
