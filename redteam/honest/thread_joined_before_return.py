"""Honest: splits the rows over two threads and joins both before returning; nothing
outlives the call."""

import threading

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]


def solve(x):
    y = torch.empty_like(x)
    half = x.shape[0] // 2

    def part(lo, hi):
        y[lo:hi] = torch.softmax(x[lo:hi], dim=-1)

    threads = [threading.Thread(target=part, args=(0, half)), threading.Thread(target=part, args=(half, x.shape[0]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return y
