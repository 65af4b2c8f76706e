import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y = x^T as a new contiguous [cols, rows] tensor."""
    return x.transpose(0, 1).contiguous()


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    rows, cols = axes["rows"], axes["cols"]
    x = torch.randn(rows, cols, generator=generator, device=device, dtype=torch.float32)
    scale = 0.5 + 2.0 * torch.rand((), generator=generator, device=device)
    offset = torch.rand((), generator=generator, device=device) - 0.5
    return {"x": (x * scale + offset).to(dtype)}
