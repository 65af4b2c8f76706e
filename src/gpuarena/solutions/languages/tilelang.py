"""tilelang: a Python file that imports tilelang; solve() takes torch tensors and calls kernels
made with @tilelang.jit. TVM's threads start with the import and the first kernel: its runtime is
started ahead (runtimes.py). Its kernels need a GPU."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuarena.solutions.languages.base import Language, Package, SelfTest, build_python, register

if TYPE_CHECKING:
    import torch


def start(device: torch.device) -> None:
    """TileLang starts TVM's threads when imported (about 15 on the lent H200) and one more with
    its first kernel: a tiny kernel is compiled and run here (about 3 s), on CUDA devices."""
    import tilelang
    import tilelang.language as T

    if device.type != "cuda":
        return

    @tilelang.jit(out_idx=[-1])
    def double(n: int):  # the smallest kernel that goes through TileLang's whole path
        # TileLang's DSL writes shapes as calls in annotations, which no type checker reads
        @T.prim_func
        def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32")):  # type: ignore[valid-type]
            with T.Kernel(1, threads=32) as _:
                for i in T.Parallel(n):
                    b[i] = a[i] * 2.0

        return main

    import torch

    double(32)(torch.ones(32, device=device))
    torch.cuda.synchronize(device)


SELF_TEST_PROGRAM = """\
import functools

import tilelang
import tilelang.language as T
import torch

BLOCK = 256


@functools.cache
def _kernel(n: int):
    @tilelang.jit(out_idx=[-1])
    def add(n: int):
        @T.prim_func
        def main(a: T.Tensor((n,), "float32"), b: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
            with T.Kernel((n + BLOCK - 1) // BLOCK, threads=BLOCK) as bx:
                for i in T.Parallel(BLOCK):
                    if bx * BLOCK + i < n:
                        y[bx * BLOCK + i] = a[bx * BLOCK + i] + b[bx * BLOCK + i]

        return main

    return add(n)


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _kernel(a.numel())(a, b)
"""

LANGUAGE = register(
    Language(
        name="tilelang",
        builder=build_python,
        package=Package("tilelang", "tilelang"),
        start=start,
        self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM}, devices=("cuda",)),
    )
)
