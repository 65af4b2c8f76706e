"""cute-dsl: a Python file that imports cutlass (NVIDIA's CuTe DSL, the nvidia-cutlass-dsl
package); solve() takes torch tensors and calls @cute.jit functions on views of them. Its first
compile starts threads: its runtime is started ahead (runtimes.py). It compiles for NVIDIA GPUs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuarena.solutions.languages.base import Language, Package, SelfTest, build_python, register

if TYPE_CHECKING:
    import torch


def start(device: torch.device) -> None:
    """CuTe DSL (nvidia-cutlass-dsl) starts two threads with its first compile (seen on the lent
    H200): a one-block kernel is compiled and run here, on CUDA devices (cute_dsl_start.py)."""
    import cutlass  # noqa: F401  (the import alone on the CPU: CuTe DSL compiles for NVIDIA GPUs only)

    if device.type != "cuda":
        return
    from gpuarena.solutions import cute_dsl_start

    cute_dsl_start.start(device)


SELF_TEST_PROGRAM = """\
import functools

import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

THREADS = 256


@cute.kernel
def add_kernel(a: cute.Tensor, b: cute.Tensor, y: cute.Tensor, n: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    i = bidx * THREADS + tidx
    if i < n:
        y[i] = a[i] + b[i]


@cute.jit
def add(a: cute.Tensor, b: cute.Tensor, y: cute.Tensor, n: cutlass.Int32):
    add_kernel(a, b, y, n).launch(grid=((n + THREADS - 1) // THREADS, 1, 1), block=(THREADS, 1, 1))


@functools.cache
def _compiled(n: int):
    probe = [torch.empty(n, device="cuda") for _ in range(3)]
    return cute.compile(add, *(from_dlpack(t) for t in probe), n)


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(a)
    n = a.numel()
    _compiled(n)(from_dlpack(a), from_dlpack(b), from_dlpack(y), n)
    return y
"""

LANGUAGE = register(
    Language(
        name="cute-dsl",
        builder=build_python,
        package=Package("cutlass", "nvidia-cutlass-dsl", version_from=("nvidia-cutlass-dsl-libs-base",)),
        start=start,
        self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM}, devices=("cuda",)),
    )
)
