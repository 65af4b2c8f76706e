import math

import torch


def reference(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
              w_down: torch.Tensor) -> torch.Tensor:
    """y = (silu(x @ w_gate) * (x @ w_up)) @ w_down, all in float32, cast to x.dtype.

    x: [tokens, hidden], w_gate/w_up: [hidden, inter], w_down: [inter, hidden].
    """
    xf = x.float()
    h = torch.nn.functional.silu(xf @ w_gate.float()) * (xf @ w_up.float())
    return (h @ w_down.float()).to(x.dtype)


def _weight(rows: int, cols: int, generator: torch.Generator,
            device: torch.device) -> torch.Tensor:
    scale = (0.9 + 0.3 * torch.rand((), generator=generator, device=device)) / math.sqrt(rows)
    w = torch.randn(rows, cols, generator=generator, device=device, dtype=torch.float32)
    return w * scale


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden, inter = axes["tokens"], axes["hidden"], axes["inter"]
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    x = x * (0.8 + 0.4 * torch.rand((), generator=generator, device=device)) + (
        0.4 * torch.rand((), generator=generator, device=device) - 0.2)
    w_gate = _weight(hidden, inter, generator, device)
    w_up = _weight(hidden, inter, generator, device)
    w_down = _weight(inter, hidden, generator, device) * 1.5  # y is O(1)
    return {"x": x.to(dtype), "w_gate": w_gate.to(dtype), "w_up": w_up.to(dtype),
            "w_down": w_down.to(dtype)}
