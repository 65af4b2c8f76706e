import math

import torch

LORA_SCALING = 2.0  # lora_alpha / rank, a constant of the problem (e.g. alpha 32, rank 16)


def reference(x: torch.Tensor, weight: torch.Tensor, lora_a: torch.Tensor,
              lora_b: torch.Tensor) -> torch.Tensor:
    """y = x @ weight + LORA_SCALING * (x @ lora_a) @ lora_b, in float32, cast to x.dtype.

    x: [tokens, in_features], weight: [in_features, out_features],
    lora_a: [in_features, rank], lora_b: [rank, out_features].
    """
    xf = x.float()
    base = xf @ weight.float()
    delta = (xf @ lora_a.float()) @ lora_b.float()
    return (base + LORA_SCALING * delta).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, fin, fout, rank = (axes["tokens"], axes["in_features"], axes["out_features"],
                               axes["rank"])

    def rnd(*shape):
        return torch.randn(*shape, generator=generator, device=device, dtype=torch.float32)

    def u():
        return torch.rand((), generator=generator, device=device)

    x = rnd(tokens, fin) * (0.8 + 0.4 * u()) + (0.4 * u() - 0.2)
    weight = rnd(fin, fout) * (0.8 + 0.4 * u()) / math.sqrt(fin)
    lora_a = rnd(fin, rank) * (0.8 + 0.4 * u()) / math.sqrt(fin)
    # the adapter's contribution is of the same order as the base layer's
    lora_b = rnd(rank, fout) * (0.25 + 0.15 * u()) / math.sqrt(rank)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "lora_a": lora_a.to(dtype),
            "lora_b": lora_b.to(dtype)}
