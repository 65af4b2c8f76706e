"""The one-block CuTe DSL kernel the worker compiles and runs before a cute-dsl solution is
imported (languages/cute_dsl.py, start). Its own module because CuTe DSL reads a kernel's source
and resolves names in the module's globals: `cute` must be imported at module level."""

import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def _double_kernel(a: cute.Tensor, b: cute.Tensor):
    i, _, _ = cute.arch.thread_idx()
    b[i] = a[i] + a[i]


@cute.jit
def _double(a: cute.Tensor, b: cute.Tensor):
    _double_kernel(a, b).launch(grid=(1, 1, 1), block=(32, 1, 1))


def start(device: torch.device) -> None:
    """Compile and run the kernel on device: CuTe DSL's first compile starts its threads."""
    a, b = torch.ones(32, device=device), torch.empty(32, device=device)
    cute.compile(_double, from_dlpack(a), from_dlpack(b))(from_dlpack(a), from_dlpack(b))
    torch.cuda.synchronize(device)
    if not bool((b == 2).all()):
        raise RuntimeError("CuTe DSL's start-up kernel computed a wrong value")
