"""ResNet-50's first bottleneck of a stage: stride 2 on the 3x3 conv and a strided 1x1 projection shortcut.

ResNet-50 (torchvision v1.5, microsoft/resnet-50), with the numbers of its published config (microsoft/resnet-50 config.json).
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
    "eps": 1e-05
}


INPUTS: dict[str, dict[str, Any]] = {
    "x": {"shape": ["batch", "cin", "size", "size"], "init": "act", "scale": 1.0},
    "conv1": {"shape": ["mid", "cin", "1", "1"], "init": "weight", "scale": 1.0},
    "conv1_w": {"shape": ["mid"], "init": "norm", "scale": 1.0},
    "conv1_b": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "conv1_mean": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "conv1_var": {"shape": ["mid"], "init": "positive", "scale": 1.0},
    "conv2": {"shape": ["mid", "mid", "3", "3"], "init": "weight", "scale": 1.0},
    "conv2_w": {"shape": ["mid"], "init": "norm", "scale": 1.0},
    "conv2_b": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "conv2_mean": {"shape": ["mid"], "init": "bias", "scale": 0.1},
    "conv2_var": {"shape": ["mid"], "init": "positive", "scale": 1.0},
    "conv3": {"shape": ["cout", "mid", "1", "1"], "init": "weight", "scale": 1.0},
    "conv3_w": {"shape": ["cout"], "init": "norm", "scale": 1.0},
    "conv3_b": {"shape": ["cout"], "init": "bias", "scale": 0.1},
    "conv3_mean": {"shape": ["cout"], "init": "bias", "scale": 0.1},
    "conv3_var": {"shape": ["cout"], "init": "positive", "scale": 1.0},
    "down": {"shape": ["cout", "cin", "1", "1"], "init": "weight", "scale": 1.0},
    "down_w": {"shape": ["cout"], "init": "norm", "scale": 1.0},
    "down_b": {"shape": ["cout"], "init": "bias", "scale": 0.1},
    "down_mean": {"shape": ["cout"], "init": "bias", "scale": 0.1},
    "down_var": {"shape": ["cout"], "init": "positive", "scale": 1.0},
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


def conv_bn(p: Params, x: torch.Tensor, name: str, stride: int, relu: bool, cfg: Config) -> torch.Tensor:
    """A convolution (no bias, `name`, padding to keep the size) and its inference-mode batch
    norm (`name_w`, `name_b`, `name_mean`, `name_var`) in float32, then ReLU where asked."""
    w = p[name]
    y = F.conv2d(x, w, stride=stride, padding=w.shape[-1] // 2).float()
    shape = (1, -1, 1, 1)
    y = (y - p[f"{name}_mean"].float().view(shape)) * torch.rsqrt(p[f"{name}_var"].float().view(shape) + cfg["eps"])
    y = y * p[f"{name}_w"].float().view(shape) + p[f"{name}_b"].float().view(shape)
    return (y.relu() if relu else y).to(x.dtype)


def bottleneck(p: Params, cfg: Config) -> torch.Tensor:
    """Level 4: ResNet-50's bottleneck block (v1.5: the stride on the 3x3 convolution): 1x1,
    3x3, 1x1 convolutions with batch norms, the shortcut (a strided 1x1 projection `down` where
    the block changes size), the sum and a ReLU."""
    x, stride = p["x"], 2 if "down" in p else 1
    h = conv_bn(p, x, "conv1", 1, True, cfg)
    h = conv_bn(p, h, "conv2", stride, True, cfg)
    h = conv_bn(p, h, "conv3", 1, False, cfg)
    short = conv_bn(p, x, "down", stride, False, cfg) if "down" in p else x
    return (h.float() + short.float()).relu().to(x.dtype)


def reference(x, conv1, conv1_w, conv1_b, conv1_mean, conv1_var, conv2, conv2_w, conv2_b, conv2_mean, conv2_var, conv3, conv3_w, conv3_b, conv3_mean, conv3_var, down, down_w, down_b, down_mean, down_var):
    return bottleneck(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw_inputs(INPUTS, axes, dtype, device, generator)
