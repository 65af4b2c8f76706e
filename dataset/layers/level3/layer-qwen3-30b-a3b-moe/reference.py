"""Sparse MoE: softmax router, top-8 of 128 SwiGLU experts, renormalised weights.

Qwen3-30B-A3B (Qwen3-MoE), with the numbers of its published config (Qwen/Qwen3-30B-A3B config.json).
Written by gpuarena.dataset.layers (scripts/make_layers.py) in plain PyTorch from the published
architecture, not harvested; every parameter is an input."""


from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

Params = dict[str, Any]
Config = dict[str, Any]


CONFIG: Config = {
    "eps": 1e-06,
    "rope_theta": 1000000.0,
    "head_dim": 128,
    "top_k": 8,
    "norm_topk": True
}


INPUTS: dict[str, dict[str, Any]] = {
    "x": {"shape": ["batch", "seq", "hidden"], "init": "act", "scale": 1.0, "route": {"top_k": 8, "boost": 6.0}},
    "w_router": {"shape": ["experts", "hidden"], "init": "weight", "scale": 1.0},
    "experts_gate": {"shape": ["experts", "moe_inter", "hidden"], "init": "weight", "scale": 1.0},
    "experts_up": {"shape": ["experts", "moe_inter", "hidden"], "init": "weight", "scale": 1.0},
    "experts_down": {"shape": ["experts", "hidden", "moe_inter"], "init": "weight", "scale": 1.0},
}


def _size(expr: str, axes: dict[str, int]) -> int:
    """An input's dimension: an axis name or a product of them ("heads*head_dim")."""
    return math.prod(axes[name] if name in axes else int(name) for name in expr.split("*"))


def draw_inputs(
    specs: dict[str, dict[str, Any]], axes: dict[str, int], dtype: torch.dtype, device: Any, generator: Any
) -> Params:
    """Every input at a model's scale: activations of unit size with rows of different
    magnitudes, weights scaled by 1/sqrt(fan-in), norm weights 1 + 0.1 randn (or 0.1 randn where
    the model adds the one itself), biases and statistics drawn so that each changes the output.
    Each tensor is cast to `dtype` once drawn and a weight is scaled in place: drawing a
    model's set then holds one float32 tensor at a time, not the whole set in float32
    (DeepSeek-V3's decoder layer: 42.9 GiB more than its 21.5 GiB of bf16 inputs), with the
    same values bit for bit. The router's weight and the states that lean on it stay float32
    until `lean` has read them."""

    def normal(shape: list[int]) -> torch.Tensor:
        return torch.randn(shape, generator=generator, device=device, dtype=torch.float32)

    def uniform() -> float:
        return float(torch.rand((), generator=generator, device=device))

    routed = [name for name, spec in specs.items() if "route" in spec]
    kept = {*routed, "w_router"} if routed else set()  # lean() reads them in float32
    out: Params = {}
    for name, spec in specs.items():
        shape = [_size(e, axes) for e in spec["shape"]]
        kind, scale = spec["init"], spec.get("scale", 1.0)
        if kind == "act":  # hidden states: rows of different magnitudes, a small offset
            rows = normal([*shape[:-1], 1])
            value = (normal(shape) + 0.2 * uniform() - 0.1) * torch.exp(0.3 * rows) * scale
        elif kind == "weight":  # [out, in], [experts, out, in] or a convolution's [out, in, kh, kw]
            fan = math.prod(shape[1:]) if len(shape) == 4 else shape[-1]
            value = normal(shape).mul_(0.8 + 0.4 * uniform()).mul_(scale).div_(math.sqrt(fan))
        elif kind == "norm":  # a norm's weight around one (or around zero, scale 0: Gemma's 1 + w)
            value = scale + spec.get("spread", 0.1) * normal(shape)
        elif kind == "scalar":  # a size of the model's that is no tensor's (a sliding window)
            out[name] = axes[spec["shape"][0]]
            continue
        elif kind == "positive":  # a batch norm's running variance
            value = scale * (0.5 + torch.rand(shape, generator=generator, device=device))
        else:  # "bias", "cache": centred normals of the given size
            value = normal(shape).mul_(scale)
        out[name] = value if name in kept else value.to(dtype)
    for name in routed:  # after the router: its rows are what the hidden states lean toward
        out[name] = lean(out[name], out["w_router"], specs[name]["route"], generator)
    return {name: v.to(dtype) if isinstance(v, torch.Tensor) else v for name, v in out.items()}


def lean(x: torch.Tensor, router: torch.Tensor, route: dict[str, Any], generator: Any) -> torch.Tensor:
    """Hidden states that lean toward top_k experts of each token's own (a random pick; within
    topk_group random groups of n_group where the router limits groups): `boost` times each
    picked expert's unit router row is added, so a router's choice has a margin that rounding
    cannot flip. A trained router's tokens have such margins; a near tie would make an honest
    kernel's experts differ from the reference's, and no tolerance could judge that."""
    experts, top_k = router.shape[0], int(route["top_k"])
    tokens = x.shape[:-1].numel()
    groups, keep = int(route.get("n_group", 1)), int(route.get("topk_group", 1))
    per = experts // groups

    def pick(rows: int, n: int, k: int) -> torch.Tensor:
        return torch.rand(rows, n, generator=generator, device=x.device).argsort(-1)[:, :k]

    chosen = pick(tokens, groups, keep)[:, :, None] * per  # the groups, then experts within them
    chosen = (chosen + pick(tokens * keep, per, top_k // keep).view(tokens, keep, -1)).flatten(1)
    rows = router.float() / router.float().norm(dim=-1, keepdim=True)
    push = rows[chosen].sum(1) * float(route["boost"])
    return x + push.view_as(x)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float = 0.0) -> torch.Tensor:
    """RMSNorm in float32; offset 1 where the model scales by (1 + weight) (Gemma)."""
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (y * (offset + weight.float())).to(x.dtype)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    """LayerNorm in float32, rounded back."""
    return F.layer_norm(x.float(), x.shape[-1:], weight.float(), bias.float(), eps).to(x.dtype)


def heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """[B, S, n * d] -> [B, n, S, d]."""
    return x.unflatten(-1, (n, -1)).transpose(1, 2)


def gated_mlp(x: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, act: str) -> torch.Tensor:
    """down(act(gate(x)) * up(x)): SwiGLU (act "silu") or GeGLU ("gelu_tanh"); the product in
    float32, rounded once."""
    g, u = F.linear(x, gate).float(), F.linear(x, up).float()
    a = F.silu(g) if act == "silu" else F.gelu(g, approximate="tanh")
    return F.linear((a * u).to(x.dtype), down)


def mlp(p: Params, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """The dense MLP: gated (`w_gate`, `w_up`, `w_down`, or Phi-3's fused `w_gate_up`) or, with
    biases `b_up` and `b_down`, BERT's and ViT's GELU MLP."""
    if "w_gate_up" in p:
        gate, up = p["w_gate_up"].chunk(2, 0)
        return gated_mlp(x, gate, up, p["w_down"], cfg["act"])
    if "w_gate" in p:
        return gated_mlp(x, p["w_gate"], p["w_up"], p["w_down"], cfg["act"])
    h = F.gelu(F.linear(x, p["w_up"], p["b_up"]).float()).to(x.dtype)
    return F.linear(h, p["w_down"], p["b_down"])


def route(p: Params, x2d: torch.Tensor, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """The router, in float32: each token's top-k experts and their weights. Softmax scoring
    (Mixtral, Qwen, DeepSeek-V2), or sigmoid scoring with a selection bias `router_bias` and
    group-limited choice (DeepSeek-V3: the best `topk_group` of `n_group` groups, each group
    scored by its two best experts); weights renormalised where the config says, then scaled."""
    logits = x2d.float() @ p["w_router"].float().t()
    top_k = int(cfg["top_k"])
    if cfg.get("scoring", "softmax") == "sigmoid":
        scores = logits.sigmoid()
        choice = scores + p["router_bias"].float() if "router_bias" in p else scores
        groups = int(cfg["n_group"])
        best = choice.unflatten(-1, (groups, -1)).topk(2, -1).values.sum(-1)
        kept = torch.zeros_like(best, dtype=torch.bool).scatter(1, best.topk(int(cfg["topk_group"]), -1).indices, True)
        choice = choice.masked_fill(~kept.repeat_interleave(choice.shape[-1] // groups, 1), float("-inf"))
        ids = choice.topk(top_k, -1).indices
        weights = scores.gather(1, ids)
    else:
        weights, ids = logits.softmax(-1).topk(top_k, -1)
    if cfg.get("norm_topk", False):
        weights = weights / weights.sum(-1, keepdim=True)
    return ids, weights * float(cfg.get("routed_scale", 1.0))


def moe(p: Params, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """A mixture of experts: the router, each expert's SwiGLU MLP on the tokens routed to it
    (`experts_gate`, `experts_up`, `experts_down`: [experts, out, in]), their outputs weighted
    and summed in float32 in slot order; plus shared experts (`shared_gate`, ...; gated by a
    sigmoid of `shared_router` where the model has one, Qwen1.5-MoE)."""
    x2d = x.flatten(0, -2)
    ids, weights = route(p, x2d, cfg)
    slots = torch.zeros(*ids.shape, x2d.shape[-1], dtype=torch.float32, device=x.device)
    for e in range(p["experts_gate"].shape[0]):
        rows, slot = torch.where(ids == e)
        if rows.numel():
            y = gated_mlp(x2d[rows], p["experts_gate"][e], p["experts_up"][e], p["experts_down"][e], "silu")
            slots[rows, slot] = y.float() * weights[rows, slot, None]
    out = slots.sum(1)
    if "shared_gate" in p:
        shared = gated_mlp(x2d, p["shared_gate"], p["shared_up"], p["shared_down"], "silu").float()
        if "shared_router" in p:
            shared = shared * (x2d.float() @ p["shared_router"].float().t()).sigmoid()
        out = out + shared
    return out.to(x.dtype).view_as(x)


def mlp_block(p: Params, cfg: Config) -> torch.Tensor:
    """Level 3: a mixture of experts alone, or BERT's MLP with its residual and post-norm."""
    x = p["x"]
    if "w_router" in p:
        return moe(p, x, cfg)
    return layer_norm(x + mlp(p, x, cfg), p["mlp_norm"], p["mlp_norm_b"], cfg["eps"])


def norm(p: Params, name: str, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """The layer's norm `name`: LayerNorm where it has a bias, else RMSNorm (Gemma's 1 + w)."""
    if f"{name}_b" in p:
        return layer_norm(x, p[name], p[f"{name}_b"], cfg["eps"])
    return rms_norm(x, p[name], cfg["eps"], float(cfg.get("norm_offset", 0.0)))


def reference(x, w_router, experts_gate, experts_up, experts_down):
    return mlp_block(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw_inputs(INPUTS, axes, dtype, device, generator)
