"""Does CuTe DSL (nvidia-cutlass-dsl 4.8.1) run on the lent GPU, and what threads does it start?

Run there with the package carried in two calls (the cu13 libs wheel is 92 MB: split it, see
bench/gpu/README.md): PYTHONPATH=/tmp/cdsite/nvidia_cutlass_dsl/dsl_packages:/tmp/cdsite python3 THIS.
On an H200 (2026-11-26): import 2.8 s, no new thread; the first compile adds 2 threads; the
elementwise add is exact. Not yet run through the harness (examples/add/cute_dsl.py)."""

import os
import time
import traceback

import torch


def threads():
    return len(os.listdir("/proc/self/task"))


print("threads at start", threads(), flush=True)
t = time.time()
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

print("import", round(time.time() - t, 2), getattr(cutlass, "__version__", "?"), "threads", threads(), flush=True)


@cute.kernel
def add_kernel(gA: cute.Tensor, gB: cute.Tensor, gC: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * 256 + tidx
    if i < n:
        gC[i] = gA[i] + gB[i]


@cute.jit
def add(mA: cute.Tensor, mB: cute.Tensor, mC: cute.Tensor, n: cutlass.Int32):
    add_kernel(mA, mB, mC, n).launch(grid=((n + 255) // 256, 1, 1), block=(256, 1, 1))


try:
    a = torch.randn(1 << 20, device="cuda")
    b = torch.randn_like(a)
    c = torch.empty_like(a)
    A, B, C = (from_dlpack(x) for x in (a, b, c))
    t = time.time()
    compiled = cute.compile(add, A, B, C, a.numel())
    print("compile", round(time.time() - t, 2), "threads", threads(), flush=True)
    compiled(A, B, C, a.numel())
    torch.cuda.synchronize()
    print("max err", (c - (a + b)).abs().max().item(), "threads", threads(), flush=True)
    t = time.time()
    add(A, B, C, a.numel())
    torch.cuda.synchronize()
    print("jit call (cached?)", round(time.time() - t, 3), "threads", threads(), flush=True)
except Exception:
    print("FAILED", traceback.format_exc()[-3000:], flush=True)
