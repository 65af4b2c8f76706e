import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension, computed in float32 and cast back to x.dtype."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    rows, cols = axes["rows"], axes["cols"]
    x = torch.randn(rows, cols, generator=generator, device=device, dtype=torch.float32)
    # logits of spread 1..4 and a random offset (softmax must subtract the row max)
    scale = 1.0 + 3.0 * torch.rand((), generator=generator, device=device)
    offset = 4.0 * torch.rand((), generator=generator, device=device) - 2.0
    return {"x": (x * scale + offset).to(dtype)}
