import math

import torch

TOP_K = 4  # experts per token (gpt-oss, DBRX, Qwen1.5-MoE), a constant of the problem


def reference(x: torch.Tensor, w_router: torch.Tensor,
              b_router: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """gpt-oss style top-k router.

    logits = x @ w_router + b_router (float32)     x: [tokens, hidden],
                                                   w_router: [hidden, experts], b_router: [experts]
    topk_ids = indices of the TOP_K largest logits per token, largest first   (int64)
    topk_weights = softmax over those TOP_K logits (float32, cast to x.dtype)
    """
    logits = x.float() @ w_router.float() + b_router.float()
    top_vals, top_ids = torch.topk(logits, TOP_K, dim=-1, largest=True, sorted=True)
    return torch.softmax(top_vals, dim=-1).to(x.dtype), top_ids


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Inputs on a coarse power-of-two grid: small integers times 2^-e. Every product and
    every partial sum of x @ w_router + b_router is then exact in float32 (and in TF32 and
    bfloat16-input / float32-accumulate tensor-core GEMMs), whatever the summation order.
    Tokens whose top TOP_K + 1 logits are closer than 2^-6 * max(1, |logit|) are redrawn, so
    the expert ids and their order are unique, and stay so even if a solution rounds the
    logits to bfloat16 (relative error 2^-9) before the top-k."""
    tokens, hidden, experts = axes["tokens"], axes["hidden"], axes["experts"]

    def randint(lo, hi, shape):
        return torch.randint(lo, hi, shape, generator=generator, device=device,
                             dtype=torch.int64)

    # grid steps: logits get a spread of about 1.5 to 3
    e_total = round(math.log2(24.0 * math.sqrt(hidden) / 2.0))
    sx, sw = 2.0 ** -3, 2.0 ** -(e_total - 3)
    mx, mw = int(randint(5, 9, ())), int(randint(5, 9, ()))   # random ranges (scales)
    x_off = int(randint(-1, 2, ()))                           # random offset

    def draw_x(n):
        return randint(-mx, mx + 1, (n, hidden)) + x_off

    xi = draw_x(tokens)
    wi = randint(-mw, mw + 1, (hidden, experts))
    bi = randint(-256, 257, (experts,))
    # exact logits (float64 holds these sums exactly)
    unit = sx * sw
    bd = bi.double() * unit
    wd = wi.double() * sw
    idx = torch.arange(tokens, device=device)          # rows still to check
    for _ in range(200):
        logits = (xi[idx].double() * sx) @ wd + bd
        top = torch.topk(logits, min(TOP_K + 1, experts), dim=-1).values
        gap = top[:, :-1] - top[:, 1:]
        need = 2.0 ** -6 * torch.maximum(top[:, :-1].abs(), torch.ones_like(gap))
        close = (gap < need).any(dim=-1)
        if not bool(close.any()):
            break
        idx = idx[close]
        xi[idx] = draw_x(idx.numel())
    else:
        raise RuntimeError("could not draw router inputs with separated top-k logits")
    x = (xi.double() * sx).to(dtype)
    w_router = (wi.double() * sw).to(dtype)
    b_router = (bi.double() * (sx * sw)).to(dtype)
    return {"x": x, "w_router": w_router, "b_router": b_router}
