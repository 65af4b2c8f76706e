import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y[i] = sum_j x[i, j], accumulated in float64 and rounded to x.dtype."""
    return x.double().sum(dim=-1).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    rows, cols = axes["rows"], axes["cols"]
    x = torch.randn(rows, cols, generator=generator, device=device, dtype=torch.float32)
    scale = 0.5 + 2.0 * torch.rand((), generator=generator, device=device)
    # per-row offsets of the order of the noise: sums differ from row to row and
    # carry both a mean part and a random part
    row_offset = torch.randn(rows, 1, generator=generator, device=device) / cols ** 0.5
    return {"x": (x * scale + 2.0 * row_offset * scale).to(dtype)}
