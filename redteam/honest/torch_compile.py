"""Honest: torch.compile of the plain softmax (Inductor). GPU only in this corpus: a cold
compile on a 2-core CPU takes ~40 s."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
DEVICES = ["cuda"]
TIMEOUT = 300


@torch.compile(dynamic=False)
def _softmax(x):
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(x.dtype)


def solve(x):
    return _softmax(x)
