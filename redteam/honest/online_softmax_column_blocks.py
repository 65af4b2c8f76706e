"""Honest: online softmax over column blocks of 256 (running max and rescaled running
sum), then a second pass that writes exp(x - m) / s: the algorithm of long-row kernels."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
MODE = "test"
WORKLOADS = ["small-64x1000"]

BLOCK = 256


def solve(x):
    xf = x.float()
    rows, cols = xf.shape
    m = torch.full((rows, 1), float("-inf"), device=x.device)
    s = torch.zeros(rows, 1, device=x.device)
    for start in range(0, cols, BLOCK):
        part = xf[:, start:start + BLOCK]
        m_new = torch.maximum(m, part.amax(dim=-1, keepdim=True))
        s = s * torch.exp(m - m_new) + torch.exp(part - m_new).sum(dim=-1, keepdim=True)
        m = m_new
    return (torch.exp(xf - m) / s).to(x.dtype)
