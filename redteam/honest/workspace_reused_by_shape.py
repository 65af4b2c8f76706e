"""Honest: keeps a workspace and an output buffer per shape, allocated on the first call
and reused by every later call (as a kernel library's plan cache does); every call
recomputes everything from its input and writes the whole output."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
WORKLOADS = ["small-64x1000"]

_buffers = {}


def solve(x):
    key = (tuple(x.shape), x.dtype, x.device)
    if key not in _buffers:
        _buffers[key] = (torch.empty_like(x), torch.empty(x.shape[0], 1, dtype=x.dtype, device=x.device))
    out, row = _buffers[key]
    torch.amax(x, dim=-1, keepdim=True, out=row)
    torch.sub(x, row, out=out)
    out.exp_()
    torch.sum(out, dim=-1, keepdim=True, out=row)
    return out.div_(row)
