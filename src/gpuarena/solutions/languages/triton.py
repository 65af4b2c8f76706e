"""triton: a Python file that imports triton; solve() takes torch tensors and launches kernels.
On the CPU it runs in Triton's interpreter only (TRITON_INTERPRET=1)."""

from __future__ import annotations

import os

from gpuarena.solutions.languages.base import Language, SelfTest, build_python, register

SELF_TEST_PROGRAM = """\
import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(a_ptr + offs, mask=mask) + tl.load(b_ptr + offs, mask=mask), mask=mask)


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(a)
    n = a.numel()
    add_kernel[(triton.cdiv(n, 4096),)](a, b, y, n, BLOCK=4096)
    return y
"""


def unavailable(device_type: str) -> str:
    if device_type == "cpu" and os.environ.get("TRITON_INTERPRET", "") in ("", "0"):
        return "Triton runs on the CPU only in its interpreter (TRITON_INTERPRET=1)"
    return ""


LANGUAGE = register(
    Language(
        name="triton",
        builder=build_python,
        self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM}, unavailable=unavailable),
    )
)
