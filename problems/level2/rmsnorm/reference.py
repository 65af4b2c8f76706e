import torch

EPS = 1e-6


def reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """y = x * rsqrt(mean(x^2, -1) + eps) * weight, in float32, cast to x.dtype."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
    return y.to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden = axes["tokens"], axes["hidden"]
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    # rows of very different magnitudes (hidden states grow along the residual stream)
    row_scale = torch.exp(torch.randn(tokens, 1, generator=generator, device=device))
    offset = torch.rand((), generator=generator, device=device) - 0.5
    x = (x + offset) * row_scale
    weight = 1.0 + 0.5 * torch.randn(hidden, generator=generator, device=device)
    return {"x": x.to(dtype), "weight": weight.to(dtype)}
