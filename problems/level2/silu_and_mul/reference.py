import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y = silu(x[:, :d]) * x[:, d:] with d = x.shape[-1] // 2, in float32, cast to x.dtype."""
    d = x.shape[-1] // 2
    xf = x.float()
    return (torch.nn.functional.silu(xf[..., :d]) * xf[..., d:]).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, d = axes["tokens"], axes["d"]
    x = torch.randn(tokens, 2 * d, generator=generator, device=device, dtype=torch.float32)
    scale = 1.0 + 2.0 * torch.rand((), generator=generator, device=device)
    offset = torch.rand((), generator=generator, device=device) - 0.5
    return {"x": (x * scale + offset).to(dtype)}
