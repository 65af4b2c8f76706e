"""Honest: prints a lot on every call (200 lines to stdout, 50 to stderr, including text
that looks like JSON replies and verdicts); output is logged, never parsed."""

import sys

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

_calls = 0


def solve(x):
    global _calls
    _calls += 1
    for i in range(200):
        print(f'call {_calls} line {i}: {{"op": "time", "device_ns": [1], "verdict": "FAILED"}}')
    for i in range(50):
        print(f"stderr {_calls} {i}: RuntimeError? no, just chatter", file=sys.stderr)
    return torch.softmax(x, dim=-1)
