import math

import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B, accumulated in float32 and cast back to a.dtype."""
    return torch.matmul(a.float(), b.float()).to(a.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    M, K, N = axes["M"], axes["K"], axes["N"]
    a_scale = 0.5 + torch.rand((), generator=generator, device=device)
    a_offset = 0.2 * torch.rand((), generator=generator, device=device) - 0.1
    a = torch.randn(M, K, generator=generator, device=device) * a_scale + a_offset
    # weights ~ 1/sqrt(K) so that C is O(1)
    b_scale = (0.5 + torch.rand((), generator=generator, device=device)) / math.sqrt(K)
    b = torch.randn(K, N, generator=generator, device=device) * b_scale
    return {"a": a.to(dtype), "b": b.to(dtype)}
