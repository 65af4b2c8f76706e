"""helion: a Python file that imports helion (PyTorch's tile DSL, which compiles through Triton);
solve() takes torch tensors and calls @helion.kernel functions. Its import starts native threads
(jemalloc's background thread, on the lent H200): its runtime is started ahead (runtimes.py).
Its kernels need a GPU. GPU MODE's helion tasks are written in it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuarena.solutions.languages.base import Language, Package, SelfTest, build_python, register

if TYPE_CHECKING:
    import torch


def start(device: torch.device) -> None:
    """Helion's import starts a native thread (seen from outside the worker on the lent H200, where
    GPU MODE's five helion submissions were REJECTED for it): imported here, and on CUDA devices a
    one-tile kernel compiled and run (helion_start.py), so its first compile's threads are the
    harness's too."""
    import helion
    import helion.language  # noqa: F401

    if device.type != "cuda":
        return
    from gpuarena.solutions import helion_start

    helion_start.start(device)


SELF_TEST_PROGRAM = """\
import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[1024]))
def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile in hl.tile(out.size(0)):
        out[tile] = a[tile] + b[tile]
    return out


def solve(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return add(a.reshape(-1), b.reshape(-1)).view_as(a)
"""

LANGUAGE = register(
    Language(
        name="helion",
        builder=build_python,
        package=Package("helion", "helion"),
        start=start,
        self_test=SelfTest({"solve.py": SELF_TEST_PROGRAM}, devices=("cuda",)),
    )
)
