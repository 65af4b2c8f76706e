import math

import torch

EPS = 1e-5  # Llama-3's rms_norm_eps


def reference(x: torch.Tensor, norm_weight: torch.Tensor, w_gate: torch.Tensor,
              w_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    """y = x + (silu(h @ w_gate) * (h @ w_up)) @ w_down with h = rmsnorm(x) * norm_weight.

    x: [tokens, hidden], norm_weight: [hidden], w_gate/w_up: [hidden, inter],
    w_down: [inter, hidden]. Computed in float32, cast to x.dtype.
    """
    xf = x.float()
    h = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS) * norm_weight.float()
    a = torch.nn.functional.silu(h @ w_gate.float()) * (h @ w_up.float())
    return (xf + a @ w_down.float()).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden, inter = axes["tokens"], axes["hidden"], axes["inter"]

    def rnd(*shape):
        return torch.randn(*shape, generator=generator, device=device, dtype=torch.float32)

    def u():
        return torch.rand((), generator=generator, device=device)

    # residual-stream hidden states: rows of different magnitudes
    row_scale = torch.exp(0.3 * rnd(tokens, 1)) * (0.7 + 0.6 * u())
    x = (rnd(tokens, hidden) + (0.4 * u() - 0.2)) * row_scale
    norm_weight = 1.0 + 0.3 * rnd(hidden)
    w_gate = rnd(hidden, inter) * (0.9 + 0.3 * u()) / math.sqrt(hidden)
    w_up = rnd(hidden, inter) * (0.9 + 0.3 * u()) / math.sqrt(hidden)
    w_down = rnd(inter, hidden) * (1.2 + 0.6 * u()) / math.sqrt(inter)
    return {"x": x.to(dtype), "norm_weight": norm_weight.to(dtype), "w_gate": w_gate.to(dtype),
            "w_up": w_up.to(dtype), "w_down": w_down.to(dtype)}
