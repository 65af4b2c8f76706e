"""MobileNetV2's inverted residual block, a repeat of its 14x14 stage: 1x1 expansion x6, 3x3 depthwise, 1x1 projection, each convolution with its batch norm, ReLU6 after the first two, identity shortcut.

MobileNetV2 1.0 224, with the numbers of its published config (google/mobilenet_v2_1.0_224 config.json).
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
    "eps": 0.001,
    "act": "relu6"
}


INPUTS: dict[str, dict[str, Any]] = {
    "x": {"shape": ["batch", "cin", "size", "size"], "init": "act", "scale": 1.0},
    "expand": {"shape": ["mid", "cin", "1", "1"], "init": "weight", "scale": 1.0},
    "expand_w": {"shape": ["mid"], "init": "norm", "scale": 1.0},
    "expand_b": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "expand_mean": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "expand_var": {"shape": ["mid"], "init": "positive", "scale": 1.0},
    "depthwise": {"shape": ["mid", "1", "3", "3"], "init": "weight", "scale": 1.0},
    "depthwise_w": {"shape": ["mid"], "init": "norm", "scale": 1.0},
    "depthwise_b": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "depthwise_mean": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "depthwise_var": {"shape": ["mid"], "init": "positive", "scale": 1.0},
    "project": {"shape": ["cin", "mid", "1", "1"], "init": "weight", "scale": 1.0},
    "project_w": {"shape": ["cin"], "init": "norm", "scale": 1.0},
    "project_b": {"shape": ["cin"], "init": "bias", "scale": 0.1},
    "project_mean": {"shape": ["cin"], "init": "bias", "scale": 0.1},
    "project_var": {"shape": ["cin"], "init": "positive", "scale": 1.0},
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


def norm(p: Params, name: str, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """The layer's norm `name`: LayerNorm where it has a bias, else RMSNorm (Gemma's 1 + w)."""
    if f"{name}_b" in p:
        return layer_norm(x, p[name], p[f"{name}_b"], cfg["eps"])
    return rms_norm(x, p[name], cfg["eps"], float(cfg.get("norm_offset", 0.0)))


def conv_bn_act(p: Params, x: torch.Tensor, name: str, act: str, cfg: Config) -> torch.Tensor:
    """A stride-1 convolution (no bias, `name`; depthwise where its weight has one input channel
    a group) and its inference-mode batch norm in float32, then `act`: silu, relu6 or none."""
    w = p[name]
    y = F.conv2d(x, w, padding=w.shape[-1] // 2, groups=x.shape[1] // w.shape[1]).float()
    shape = (1, -1, 1, 1)
    y = (y - p[f"{name}_mean"].float().view(shape)) * torch.rsqrt(p[f"{name}_var"].float().view(shape) + cfg["eps"])
    y = y * p[f"{name}_w"].float().view(shape) + p[f"{name}_b"].float().view(shape)
    if act == "silu":
        y = F.silu(y)
    elif act == "relu6":
        y = y.clamp(0.0, 6.0)
    return y.to(x.dtype)


def inverted_residual(p: Params, cfg: Config) -> torch.Tensor:
    """Level 4: MobileNetV2's inverted residual block, or EfficientNet's MBConv with its
    squeeze-and-excitation (`se_reduce`, `se_expand`): a 1x1 expansion, a depthwise convolution,
    each with its batch norm and activation, the excitation's channel scale, a 1x1 projection
    with its batch norm, and the identity shortcut (a repeated block of a stage: stride 1)."""
    x, act = p["x"], cfg["act"]
    h = conv_bn_act(p, x, "expand", act, cfg)
    h = conv_bn_act(p, h, "depthwise", act, cfg)
    if "se_reduce" in p:
        s = h.float().mean((2, 3), keepdim=True)
        s = F.silu(F.conv2d(s, p["se_reduce"].float(), p["se_reduce_b"].float()))
        h = (h.float() * torch.sigmoid(F.conv2d(s, p["se_expand"].float(), p["se_expand_b"].float()))).to(x.dtype)
    h = conv_bn_act(p, h, "project", "none", cfg)
    return (h.float() + x.float()).to(x.dtype)


def reference(x, expand, expand_w, expand_b, expand_mean, expand_var, depthwise, depthwise_w, depthwise_b, depthwise_mean, depthwise_var, project, project_w, project_b, project_mean, project_var):
    return inverted_residual(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw_inputs(INPUTS, axes, dtype, device, generator)
