"""A TileLang solution of level1/softmax (TileLang: the tile language of the MetaX and other
open-GPU tracks; pip install tilelang).

A file that imports tilelang is a TileLang solution: solve() takes torch tensors, as a PyTorch
or Triton solution does, and calls kernels made with @tilelang.jit. One thread block per row,
in two passes over the row in chunks of BLOCK columns: the first keeps a running max m and
sum s = sum(exp(x - m)) in float32 (the online softmax, so rows of any length fit: the Llama-3
vocabulary of 128256 columns included), the second writes exp(x - m) / s. Columns past the
row's end read as -inf, whose exponent is 0. A kernel is compiled once per (rows, cols, dtype),
in the warm-up calls before any timed one, and kept.
"""

import functools

import tilelang
import tilelang.language as T
import torch

BLOCK = 1024
THREADS = 256


@functools.cache
def _kernel(rows: int, cols: int, dtype: str):
    @tilelang.jit(out_idx=[-1])
    def softmax(M: int, N: int):
        chunks = (N + BLOCK - 1) // BLOCK

        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(M, threads=THREADS) as row:
                tile = T.alloc_fragment((1, BLOCK), "float32")
                m = T.alloc_fragment((1,), "float32")
                s = T.alloc_fragment((1,), "float32")
                chunk_max = T.alloc_fragment((1,), "float32")
                chunk_sum = T.alloc_fragment((1,), "float32")
                T.fill(m, -T.infinity("float32"))
                T.fill(s, 0.0)
                for k in T.serial(chunks):
                    for i, j in T.Parallel(1, BLOCK):
                        tile[i, j] = T.if_then_else(
                            k * BLOCK + j < N, T.cast(X[row, k * BLOCK + j], "float32"), -T.infinity("float32")
                        )
                    T.reduce_max(tile, chunk_max, dim=1, clear=True)
                    for i in T.Parallel(1):
                        chunk_max[i] = T.max(chunk_max[i], m[i])
                    for i, j in T.Parallel(1, BLOCK):
                        tile[i, j] = T.exp(tile[i, j] - chunk_max[i])
                    T.reduce_sum(tile, chunk_sum, dim=1, clear=True)
                    for i in T.Parallel(1):
                        s[i] = s[i] * T.exp(m[i] - chunk_max[i]) + chunk_sum[i]
                        m[i] = chunk_max[i]
                for k in T.serial(chunks):
                    for i, j in T.Parallel(1, BLOCK):
                        if k * BLOCK + j < N:
                            Y[row, k * BLOCK + j] = T.cast(
                                T.exp(T.cast(X[row, k * BLOCK + j], "float32") - m[i]) / s[i], dtype
                            )

        return main

    return softmax(rows, cols)


def solve(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.shape
    return _kernel(rows, cols, str(x.dtype).removeprefix("torch."))(x.contiguous())
