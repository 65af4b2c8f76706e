"""pytorch: a Python file whose solve() takes and returns torch tensors."""

from __future__ import annotations

from gpuarena.solutions.languages.base import Language, SelfTest, build_python, register

SELF_TEST_PROGRAM = """\
import torch


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.add(a, b)
"""

LANGUAGE = register(Language(name="pytorch", builder=build_python, self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM})))
