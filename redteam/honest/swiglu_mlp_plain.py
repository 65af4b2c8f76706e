"""Honest: SwiGLU MLP (level3/swiglu_mlp): silu(x @ w_gate) * (x @ w_up) @ w_down."""

import torch
import torch.nn.functional as F

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "level3/swiglu_mlp"
MODE = "test"
WORKLOADS = ["small-32tok"]


def solve(x, w_gate, w_up, w_down):
    xf = x.float()
    return ((F.silu(xf @ w_gate.float()) * (xf @ w_up.float())) @ w_down.float()).to(x.dtype)
