"""Softmax over the last dimension in Triton: one program per row.

Two kernels:

* ``softmax_single_pass`` for rows that fit in one block (cols <= 8192): load the
  whole row once, max, exp, sum, divide, store. One read and one write of HBM.
* ``softmax_online`` for long rows (up to the 128256-wide Llama-3 vocabulary):
  pass 1 walks the row block by block keeping a running max ``m`` and a running
  sum ``s`` of exp(x - m), rescaling ``s`` whenever the max grows ("online
  softmax"); pass 2 walks the row again and writes exp(x - m) / s.

All arithmetic is float32; the result is stored in x's dtype. Masked lanes read
-inf, so they contribute exp(-inf) = 0 to the sum and never win the max.

    gpuarena run level1/softmax examples/softmax/triton.py --device cuda
    TRITON_INTERPRET=1 gpuarena run level1/softmax examples/softmax/triton.py --device cpu
"""

import torch
import triton
import triton.language as tl

MAX_SINGLE_PASS_BLOCK = 8192  # rows up to this many columns take the one-pass kernel
ONLINE_BLOCK = 4096  # column block of the two-pass kernel for longer rows


@triton.jit
def softmax_single_pass(
    x_ptr,
    y_ptr,
    cols,
    stride_xr,
    stride_xc,
    stride_yr,
    stride_yc,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)  # int64: rows * cols can exceed 2**31
    offs = tl.arange(0, BLOCK)
    mask = offs < cols

    x = tl.load(x_ptr + row * stride_xr + offs * stride_xc, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)

    x = x - tl.max(x, axis=0)
    num = tl.exp(x)  # masked lanes: exp(-inf) = 0
    y = num / tl.sum(num, axis=0)

    tl.store(y_ptr + row * stride_yr + offs * stride_yc, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def softmax_online(
    x_ptr,
    y_ptr,
    cols,
    stride_xr,
    stride_xc,
    stride_yr,
    stride_yc,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_xr
    y_row = y_ptr + row * stride_yr
    offs = tl.arange(0, BLOCK)

    # Pass 1: running max m and running sum s = sum(exp(x - m)).
    # Every block holds at least one real column, so tl.max(x) is finite and
    # m_new is finite from the first block on (m starts at -inf, s at 0).
    m = -float("inf")
    s = 0.0
    for start in range(0, cols, BLOCK):
        cols_here = start + offs
        x = tl.load(x_row + cols_here * stride_xc, mask=cols_here < cols, other=-float("inf"))
        x = x.to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new

    # Pass 2: normalise and write.
    inv_s = 1.0 / s
    for start in range(0, cols, BLOCK):
        cols_here = start + offs
        mask = cols_here < cols
        x = tl.load(x_row + cols_here * stride_xc, mask=mask, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - m) * inv_s
        tl.store(y_row + cols_here * stride_yc, y.to(y_ptr.dtype.element_ty), mask=mask)


def _num_warps(block: int) -> int:
    if block <= 1024:
        return 4
    if block <= 4096:
        return 8
    return 16


def softmax(
    x: torch.Tensor, max_single_pass_block: int = MAX_SINGLE_PASS_BLOCK, online_block: int = ONLINE_BLOCK
) -> torch.Tensor:
    """Softmax over the last dim of a 2-D tensor; the block sizes are knobs for tests."""
    assert x.dim() == 2, "expected a 2-D tensor [rows, cols]"
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)  # new and contiguous
    if rows == 0 or cols == 0:
        return y

    block = triton.next_power_of_2(cols)
    args = (x, y, cols, x.stride(0), x.stride(1), y.stride(0), y.stride(1))
    if block <= max_single_pass_block:
        softmax_single_pass[(rows,)](*args, BLOCK=block, num_warps=_num_warps(block))
    else:
        softmax_online[(rows,)](*args, BLOCK=online_block, num_warps=_num_warps(online_block))
    return y


def solve(x: torch.Tensor) -> torch.Tensor:
    return softmax(x)
