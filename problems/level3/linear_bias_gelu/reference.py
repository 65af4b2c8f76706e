import math

import torch


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y = gelu_tanh(x @ weight + bias), in float32, cast to x.dtype.

    x: [tokens, in_features], weight: [in_features, out_features], bias: [out_features].
    """
    h = x.float() @ weight.float() + bias.float()
    return torch.nn.functional.gelu(h, approximate="tanh").to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, fin, fout = axes["tokens"], axes["in_features"], axes["out_features"]
    x = torch.randn(tokens, fin, generator=generator, device=device, dtype=torch.float32)
    x = x * (0.8 + 0.4 * torch.rand((), generator=generator, device=device)) + (
        0.4 * torch.rand((), generator=generator, device=device) - 0.2)
    w_scale = (1.0 + 0.5 * torch.rand((), generator=generator, device=device)) / math.sqrt(fin)
    weight = torch.randn(fin, fout, generator=generator, device=device) * w_scale
    bias = torch.randn(fout, generator=generator, device=device) * (
        0.5 + 0.5 * torch.rand((), generator=generator, device=device))
    return {"x": x.to(dtype), "weight": weight.to(dtype), "bias": bias.to(dtype)}
