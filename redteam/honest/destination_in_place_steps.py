"""Honest, destination-passing: builds the answer in y step by step (copy a, multiply by
x, add b): in-place work on the output it was given."""

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "tests/fixtures/problems/axpy_dest"
MODE = "test"
WORKLOADS = ["n65536"]


def solve(a, x, b, y):
    y.copy_(a)
    y.mul_(x)
    y.add_(b)
