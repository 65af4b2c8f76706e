import torch


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """y = a + b (added in float32, rounded once to the input dtype)."""
    return (a.float() + b.float()).to(a.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    n = axes["n"]
    out = {}
    for name in ("a", "b"):
        x = torch.randn(n, generator=generator, device=device, dtype=torch.float32)
        scale = 0.5 + 2.0 * torch.rand((), generator=generator, device=device)
        offset = torch.rand((), generator=generator, device=device) - 0.5
        out[name] = (x * scale + offset).to(dtype)
    return out
