"""Honest: matmul accumulated over K in blocks of 64 (the loop structure of a tiled GEMM),
float32 accumulator."""

import torch

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "level1/matmul"
WORKLOADS = ["small-128x256x192"]

BLOCK_K = 64


def solve(a, b):
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    for k in range(0, a.shape[1], BLOCK_K):
        acc.addmm_(a[:, k:k + BLOCK_K].float(), b[k:k + BLOCK_K].float())
    return acc.to(a.dtype)
