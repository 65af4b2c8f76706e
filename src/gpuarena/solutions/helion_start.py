"""The one-tile Helion kernel the worker compiles and runs before a helion solution is imported
(languages/helion.py, start). Its own module because Helion reads a kernel's source and resolves
names in the module's globals: `hl` must be imported at module level."""

import helion
import helion.language as hl
import torch


@helion.kernel(config=helion.Config(block_sizes=[32]))
def _double(a: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(a)
    for tile in hl.tile(out.size(0)):
        out[tile] = a[tile] + a[tile]
    return out


def start(device: torch.device) -> None:
    """Compile and run the kernel on device: Helion's first compile goes through Triton's."""
    b = _double(torch.ones(32, device=device))
    torch.cuda.synchronize(device)
    if not bool((b == 2).all()):
        raise RuntimeError("Helion's start-up kernel computed a wrong value")
