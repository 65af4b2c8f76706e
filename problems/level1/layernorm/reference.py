import torch

EPS = 1e-5


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias over the last dim, in float32."""
    y = torch.nn.functional.layer_norm(
        x.float(), (x.shape[-1],), weight.float(), bias.float(), EPS)
    return y.to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden = axes["tokens"], axes["hidden"]
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    scale = 0.5 + 3.0 * torch.rand((), generator=generator, device=device)
    # a per-row offset: the kernel must really subtract the mean of each row
    row_offset = torch.randn(tokens, 1, generator=generator, device=device) * 2.0
    x = x * scale + row_offset
    weight = 1.0 + 0.5 * torch.randn(hidden, generator=generator, device=device)
    bias = 0.5 * torch.randn(hidden, generator=generator, device=device)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype)}
