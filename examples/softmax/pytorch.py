"""Softmax over the last dimension, written out step by step in plain PyTorch.

This is the first kernel of the tutorial: it does what torch.softmax does, one
operation at a time, so that every later version (Triton, CUDA) can be read
against it.

    gpuarena run level1/softmax examples/softmax/pytorch.py --device cpu
"""

import torch


def solve(x: torch.Tensor) -> torch.Tensor:
    # 1. Compute in float32, whatever the input dtype (bfloat16 and float16 have
    #    too few mantissa bits for the sum over a 128k-wide row).
    xf = x.float()

    # 2. Subtract the row maximum. softmax(x) == softmax(x - c) for any c, and
    #    with c = max(x) every exponent is <= 0, so exp() cannot overflow.
    row_max = xf.amax(dim=-1, keepdim=True)
    e = torch.exp(xf - row_max)

    # 3. Normalise by the row sum (at least 1, since the max element gives exp(0)).
    row_sum = e.sum(dim=-1, keepdim=True)
    y = e / row_sum

    # 4. Back to the input's dtype: a new contiguous tensor of x's shape.
    return y.to(x.dtype).contiguous()
