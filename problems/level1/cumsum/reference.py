import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y[i, j] = sum_{k <= j} x[i, k]; accumulated in float64, rounded to x.dtype."""
    return torch.cumsum(x.double(), dim=-1).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    rows, cols = axes["rows"], axes["cols"]
    x = torch.randn(rows, cols, generator=generator, device=device, dtype=torch.float32)
    scale = 0.5 + 1.5 * torch.rand((), generator=generator, device=device)
    # a random walk (noise / sqrt(cols)) plus a per-row drift: prefix sums stay O(1),
    # cross zero, and differ from row to row
    drift = torch.randn(rows, 1, generator=generator, device=device) * 2.0 / cols
    return {"x": (x * scale / cols ** 0.5 + drift).to(dtype)}
