"""The ModelNew files bench/peer_kernelbench.py runs on KernelBench's problems: our own, written
for that bench (never KernelBench's), one per default problem, as source strings."""

from __future__ import annotations

MATMUL_TORCH = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """C = A B for two square float32 matrices, one cuBLAS call."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.mm(A, B)
'''

SOFTMAX_TORCH = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each row of x scaled to sum to one: exp(x - max) / sum, PyTorch's fused kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.softmax(dim=1)
'''

RELU_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _clamp_below_zero(src, dst, count, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    index = start + tl.arange(0, BLOCK)
    inside = index < count
    value = tl.load(src + index, mask=inside)
    # a NaN stays NaN, as in torch.relu
    tl.store(dst + index, tl.where(value < 0, 0.0, value), mask=inside)


class ModelNew(nn.Module):
    """max(x, 0) elementwise, one Triton kernel over the flattened tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        count = x.numel()
        block = 4096
        _clamp_below_zero[(triton.cdiv(count, block),)](x, out, count, BLOCK=block)
        return out
'''

GEMM_LEAKY_TORCH = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """y = leaky_relu((x W^T + b) * multiplier): the bias folded into the GEMM (addmm), the
    scale and the leaky ReLU in one elementwise kernel. Its parameters are an nn.Linear's, made
    in the same order as the reference's, so the same seed gives the same weights."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        return F.leaky_relu(y * self.multiplier, self.negative_slope)
'''

SOLUTIONS: dict[str, tuple[str, str]] = {
    "level1/1_Square_matrix_multiplication_": ("cuda", MATMUL_TORCH),
    "level1/23_Softmax": ("cuda", SOFTMAX_TORCH),
    "level1/19_ReLU": ("triton", RELU_TRITON),
    "level2/12_Gemm_Multiply_LeakyReLU": ("cuda", GEMM_LEAKY_TORCH),
}
"""Problem -> (KernelBench backend, ModelNew source). `cuda` is KernelBench's default backend,
which exec()s the file (a plain PyTorch ModelNew runs there; its static checker then reports a
missing __global__ kernel, recorded); `triton` imports it from a file, as Triton needs."""
