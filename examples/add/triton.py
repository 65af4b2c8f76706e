"""The residual add (level1/add) in Triton: one program per 4096-element block, added in float32
and rounded once to the input dtype, as the reference does.

A kernel this small (64K elements: a few microseconds on an H100) with an output as large as
its inputs is the case the device audit's allowance exists for: without the harness's L2 sweep
between calls, each audited call also pays the write-back of the last call's output.

    gpuarena run level1/add examples/add/triton.py --device cuda
    TRITON_INTERPRET=1 gpuarena run level1/add examples/add/triton.py --device cpu
"""

import torch
import triton
import triton.language as tl

BLOCK = 4096


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)  # int64: n can exceed 2**31
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (a + b).to(y_ptr.dtype.element_ty), mask=mask)


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a, b = a.contiguous(), b.contiguous()
    y = torch.empty_like(a)
    n = a.numel()
    add_kernel[(triton.cdiv(n, BLOCK),)](a, b, y, n, BLOCK=BLOCK)
    return y
