import torch

EPS = 1e-6


def reference(x: torch.Tensor, residual: torch.Tensor,
              weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """residual_out = x + residual (rounded to x.dtype, as it is stored);
    y = rmsnorm(residual_out) * weight, computed in float32 from the stored residual_out."""
    residual_out = (x.float() + residual.float()).to(x.dtype)
    h = residual_out.float()
    y = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
    return y.to(x.dtype), residual_out


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden = axes["tokens"], axes["hidden"]
    # the residual stream: large, rows of different magnitudes
    residual = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    row_scale = torch.exp(torch.randn(tokens, 1, generator=generator, device=device))
    res_offset = torch.rand((), generator=generator, device=device) - 0.5
    residual = (residual + res_offset) * row_scale * 2.0
    # the sub-layer output added to it: comparable size
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    x_scale = 0.5 + 1.5 * torch.rand((), generator=generator, device=device)
    x_offset = torch.rand((), generator=generator, device=device) - 0.5
    x = x * x_scale + x_offset
    weight = 1.0 + 0.5 * torch.randn(hidden, generator=generator, device=device)
    return {"x": x.to(dtype), "residual": residual.to(dtype), "weight": weight.to(dtype)}
