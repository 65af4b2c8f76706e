import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y = 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), in float32."""
    return torch.nn.functional.gelu(x.float(), approximate="tanh").to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, dim = axes["tokens"], axes["dim"]
    x = torch.randn(tokens, dim, generator=generator, device=device, dtype=torch.float32)
    scale = 1.0 + 2.0 * torch.rand((), generator=generator, device=device)
    offset = torch.rand((), generator=generator, device=device) - 0.5
    return {"x": (x * scale + offset).to(dtype)}
