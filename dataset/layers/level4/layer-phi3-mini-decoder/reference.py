"""Phi-3 decoder layer: fused qkv and gate_up projections, MHA with head_dim 96.

Phi-3-mini-4k-instruct, with the numbers of its published config (microsoft/Phi-3-mini-4k-instruct config.json).
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
    "eps": 1e-05,
    "rope_theta": 10000.0,
    "head_dim": 96,
    "group": 1,
    "act": "silu"
}


INPUTS: dict[str, dict[str, Any]] = {
    "x": {"shape": ["batch", "seq", "hidden"], "init": "act", "scale": 1.0},
    "attn_norm": {"shape": ["hidden"], "init": "norm", "scale": 1.0},
    "wqkv": {"shape": ["3*heads*head_dim", "hidden"], "init": "weight", "scale": 1.0},
    "wo": {"shape": ["hidden", "heads*head_dim"], "init": "weight", "scale": 1.0},
    "window": {"shape": ["window"], "init": "scalar", "scale": 1.0},
    "mlp_norm": {"shape": ["hidden"], "init": "norm", "scale": 1.0},
    "w_gate_up": {"shape": ["2*inter", "hidden"], "init": "weight", "scale": 1.0},
    "w_down": {"shape": ["hidden", "inter"], "init": "weight", "scale": 1.0},
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


def rope_tables(positions: torch.Tensor, dim: int, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of the rotary embedding at `positions` ([S]), float32; YaRN's frequencies
    where the config scales them (DeepSeek)."""
    theta = float(cfg["rope_theta"])
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    yarn = cfg.get("yarn")
    if yarn:  # interpolate the low frequencies, keep the high ones, ramp between
        factor, original = float(yarn["factor"]), float(yarn["original_max_position"])

        def turns(rotations: float) -> float:
            return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        low = max(math.floor(turns(float(yarn["beta_fast"]))), 0)
        high = min(math.ceil(turns(float(yarn["beta_slow"]))), dim - 1)
        ramp = (torch.arange(dim // 2, dtype=torch.float32, device=positions.device) - low) / max(high - low, 1e-3)
        keep = 1.0 - ramp.clamp(0, 1)
        inv = inv / factor * (1 - keep) + inv * keep
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat([freqs, freqs], -1)
    return emb.cos(), emb.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotary embedding of x ([B, h, S, d]) by the rotate-half convention, in float32; interleaved
    pairs (DeepSeek's layout) are gathered into halves first."""
    xf = x.float()
    if interleaved:
        xf = xf.unflatten(-1, (-1, 2)).transpose(-1, -2).flatten(-2)
    half = xf.shape[-1] // 2
    turned = torch.cat([-xf[..., half:], xf[..., :half]], -1)
    return (xf * cos + turned * sin).to(x.dtype)


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, cfg: Config, window: int = 0
) -> torch.Tensor:
    """Softmax attention of q ([B, h, S, d]) over k, v ([B, kv, T, d]), kv heads shared by groups
    of query heads. Scores and softmax in float32 (with Gemma's soft cap), probabilities rounded
    to v's dtype as the models do. Causal unless cfg says otherwise: query i sits at position
    T - S + i; a sliding window (a scalar input: it is the model's, whatever the workload) keeps
    the last `window` keys."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    cap = float(cfg.get("softcap", 0.0))
    if cap:
        scores = cap * torch.tanh(scores / cap)
    if cfg.get("causal", True):
        n_q, n_k = q.shape[2], k.shape[2]
        qpos = torch.arange(n_k - n_q, n_k, device=q.device)[:, None]
        kpos = torch.arange(n_k, device=q.device)[None, :]
        allowed = kpos <= qpos
        if window:
            allowed = allowed & (kpos > qpos - window)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return scores.softmax(-1).to(v.dtype) @ v


def heads(x: torch.Tensor, n: int) -> torch.Tensor:
    """[B, S, n * d] -> [B, n, S, d]."""
    return x.unflatten(-1, (n, -1)).transpose(1, 2)


def merge(x: torch.Tensor) -> torch.Tensor:
    """[B, n, S, d] -> [B, S, n * d]."""
    return x.transpose(1, 2).flatten(2)


def self_attention(p: Params, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """Attention with its projections: q, k, v (fused in `wqkv`, with biases `bq`, `bk`, `bv`
    where the model has them), per-head RMSNorm of q and k (Qwen3), rotary embeddings (none
    where cfg has no rope_theta), the KV cache `k_cache`, `v_cache` before the new tokens
    (decode: the new keys, after their rotation, and values are left in p as `k_new`, `v_new`),
    attention, and the output projection (bias `bo`). The head counts follow from the
    weights' shapes and the config's head_dim (and group: query heads per KV head, when fused)."""
    head_dim = int(cfg["head_dim"])
    if "wqkv" in p:
        n_kv = p["wqkv"].shape[0] // (head_dim * (int(cfg["group"]) + 2))
        n_heads = n_kv * int(cfg["group"])
        q, k, v = F.linear(x, p["wqkv"]).split([n_heads * head_dim, n_kv * head_dim, n_kv * head_dim], -1)
    else:
        n_heads, n_kv = p["wq"].shape[0] // head_dim, p["wk"].shape[0] // head_dim
        q, k, v = (
            F.linear(x, p["wq"], p.get("bq")),
            F.linear(x, p["wk"], p.get("bk")),
            F.linear(x, p["wv"], p.get("bv")),
        )
    q, k, v = heads(q, n_heads), heads(k, n_kv), heads(v, n_kv)
    if "q_norm" in p:
        q, k = rms_norm(q, p["q_norm"], cfg["eps"]), rms_norm(k, p["k_norm"], cfg["eps"])
    past = p["k_cache"].shape[2] if "k_cache" in p else 0
    if "rope_theta" in cfg:
        cos, sin = rope_tables(torch.arange(past, past + x.shape[1], device=x.device), q.shape[-1], cfg)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    if past:  # the new tokens' keys and values are outputs too: what a decode step appends to the cache
        p["k_new"], p["v_new"] = k, v
        k, v = torch.cat([p["k_cache"], k], 2), torch.cat([p["v_cache"], v], 2)
    scale = float(cfg.get("query_scale", q.shape[-1])) ** -0.5
    return F.linear(merge(attend(q, k, v, scale, cfg, int(p.get("window", 0)))), p["wo"], p.get("bo"))


def latent_attention(p: Params, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """DeepSeek's multi-head latent attention: queries through a low-rank bottleneck (`wq_a`,
    RMSNorm `q_a_norm`, `wq_b`; one matrix `wq` where the model has no query rank), keys and
    values from one shared latent (`wkv_a` gives the latent and a shared rotary key; RMSNorm
    `kv_a_norm`; `wkv_b` expands it per head), rotary embeddings on the last dims only."""
    nope, rope, v_dim = (int(cfg[k]) for k in ("nope", "rope", "v_dim"))
    n_heads = p["wkv_b"].shape[0] // (nope + v_dim)
    eps = cfg["eps"]
    if "wq_a" in p:
        q = F.linear(rms_norm(F.linear(x, p["wq_a"]), p["q_a_norm"], eps), p["wq_b"])
    else:
        q = F.linear(x, p["wq"])
    q_nope, q_pe = heads(q, n_heads).split([nope, rope], -1)
    latent, k_pe = F.linear(x, p["wkv_a"]).split([p["wkv_a"].shape[0] - rope, rope], -1)
    kv = heads(F.linear(rms_norm(latent, p["kv_a_norm"], eps), p["wkv_b"]), n_heads)
    k_nope, v = kv.split([nope, v_dim], -1)
    cos, sin = rope_tables(torch.arange(x.shape[1], device=x.device), rope, cfg)
    q_pe = rotate(q_pe, cos, sin, interleaved=True)
    k_pe = rotate(k_pe[:, None], cos, sin, interleaved=True).expand(-1, n_heads, -1, -1)
    q, k = torch.cat([q_nope, q_pe], -1), torch.cat([k_nope, k_pe], -1)
    scale = (nope + rope) ** -0.5
    yarn = cfg.get("yarn")
    if yarn:  # YaRN's attention temperature
        scale *= (0.1 * float(yarn["mscale_all_dim"]) * math.log(float(yarn["factor"])) + 1.0) ** 2
    return F.linear(merge(attend(q, k, v, scale, cfg)), p["wo"])


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


def decoded(p: Params, out: torch.Tensor) -> Any:
    """The output, and in a decode step (a KV cache among the inputs) the keys and values it
    appends to the cache."""
    return (out, p["k_new"], p["v_new"]) if "k_cache" in p else out


def norm(p: Params, name: str, x: torch.Tensor, cfg: Config) -> torch.Tensor:
    """The layer's norm `name`: LayerNorm where it has a bias, else RMSNorm (Gemma's 1 + w)."""
    if f"{name}_b" in p:
        return layer_norm(x, p[name], p[f"{name}_b"], cfg["eps"])
    return rms_norm(x, p[name], cfg["eps"], float(cfg.get("norm_offset", 0.0)))


def decoder_layer(p: Params, cfg: Config) -> Any:
    """Level 4: a whole transformer layer. Pre-norm (Llama and its kin, ViT): x + attn(norm(x)),
    then + mlp(norm(.)); Gemma-2 also norms each branch's output; post-norm (BERT) norms after
    each residual add. The MLP is a mixture of experts where the layer has a router."""
    x = p["x"]
    attention = latent_attention if "wkv_a" in p else self_attention
    feed = moe if "w_router" in p else mlp
    if cfg.get("post_norm"):
        h = norm(p, "attn_norm", x + attention(p, x, cfg), cfg)
        return norm(p, "mlp_norm", h + feed(p, h, cfg), cfg)
    a = attention(p, norm(p, "attn_norm", x, cfg), cfg)
    if "post_attn_norm" in p:
        a = norm(p, "post_attn_norm", a, cfg)
    h = x + a
    m = feed(p, norm(p, "mlp_norm", h, cfg), cfg)
    if "post_mlp_norm" in p:
        m = norm(p, "post_mlp_norm", m, cfg)
    return decoded(p, h + m)


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


def reference(x, attn_norm, wqkv, wo, window, mlp_norm, w_gate_up, w_down):
    return decoder_layer(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw_inputs(INPUTS, axes, dtype, device, generator)
