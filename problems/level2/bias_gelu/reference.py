import torch


def reference(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y = gelu_tanh(x + bias), bias broadcast over rows, computed in float32."""
    h = x.float() + bias.float()
    return torch.nn.functional.gelu(h, approximate="tanh").to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, dim = axes["tokens"], axes["dim"]
    x = torch.randn(tokens, dim, generator=generator, device=device, dtype=torch.float32)
    scale = 1.0 + 2.0 * torch.rand((), generator=generator, device=device)
    offset = torch.rand((), generator=generator, device=device) - 0.5
    bias = torch.randn(dim, generator=generator, device=device) * (
        0.5 + torch.rand((), generator=generator, device=device))
    return {"x": (x * scale + offset).to(dtype), "bias": bias.to(dtype)}
