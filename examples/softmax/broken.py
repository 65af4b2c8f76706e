"""A plausible-looking but WRONG softmax, for the tutorial's "see a failure explained" step.

It normalises over dim 0 (down the columns) instead of the last dimension. The
output has the right shape and dtype and every column sums to 1, so nothing
crashes; only the values are wrong, and the harness reports WRONG_VALUES:

    gpuarena run level1/softmax examples/softmax/broken.py --device cpu
"""

import torch


def solve(x: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    row_max = xf.amax(dim=0, keepdim=True)  # bug: should be dim=-1
    e = torch.exp(xf - row_max)
    return (e / e.sum(dim=0, keepdim=True)).to(x.dtype)  # bug: should be dim=-1
