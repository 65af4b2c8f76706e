"""The plain-PyTorch pieces of the level-2 fusions along a sequence (dataset/fusions.py): rotary
embeddings, the attention's elementwise and softmax steps without its matrix multiplies, and
two recurrences (Mamba's selective scan, RWKV's WKV).

Copied by source into each reference, as fusion_ops' pieces are. Rotary tables, scores and
recurrent states are float32, the outputs rounded to the inputs' dtype.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpuarena.dataset.layer_ops import rope_tables, rotate

Params = dict[str, Any]
Config = dict[str, Any]


def _angles(positions: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    """Rotary angles [..., dim / 2]: float32 positions times theta^(-2i / dim)."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    return positions.float()[..., None] * inv


def _turn_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half (GPT-NeoX) rotation of x's last dim by angles whose cos and sin cover half
    of it, in float32, rounded back."""
    x1, x2 = x.float().chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


def rotary_cached_qk(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary embedding as vLLM applies it: each token's cos | sin row gathered from a cache by
    its position, q and k ([tokens, heads * head_dim]) rotated by halves."""
    cos, sin = p["cos_sin_cache"][p["positions"]].float().chunk(2, -1)
    dim = int(cfg["head_dim"])

    def turn(x: torch.Tensor) -> torch.Tensor:
        return _turn_halves(x.unflatten(-1, (-1, dim)), cos[:, None], sin[:, None]).flatten(-2)

    return turn(p["query"]), turn(p["key"])


def rotary_interleaved_partial(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """GPT-J's rotary embedding on q and k ([batch, seq, heads, head_dim]) at positions 0..seq-1:
    the first rotary_dim dims of each head turned by adjacent pairs (rotate_every_two), the rest
    passed through."""
    dim = int(cfg["rotary_dim"])
    angles = _angles(torch.arange(p["query"].shape[1], device=p["query"].device), dim, float(cfg["rope_theta"]))
    cos, sin = (t.repeat_interleave(2, -1)[:, None] for t in (angles.cos(), angles.sin()))

    def turn(x: torch.Tensor) -> torch.Tensor:
        part = x[..., :dim].float()
        pairs = part.unflatten(-1, (-1, 2))
        turned = torch.stack([-pairs[..., 1], pairs[..., 0]], -1).flatten(-2)
        return torch.cat([(part * cos + turned * sin).to(x.dtype), x[..., dim:]], -1)

    return turn(p["query"]), turn(p["key"])


def rotary_partial_halves(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Phi-2's partial rotary embedding: the first rotary_dim dims of each head of q and k
    ([batch, heads, seq, head_dim]) turned by halves at each token's position id, the rest
    passed through."""
    dim = int(cfg["rotary_dim"])
    angles = _angles(p["position_ids"], dim, float(cfg["rope_theta"]))[:, None]

    def turn(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([_turn_halves(x[..., :dim], angles.cos(), angles.sin()), x[..., dim:]], -1)

    return turn(p["query"]), turn(p["key"])


def rotary_llama3_scaled(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama-3.1's rotary embedding (rope_type llama3): inverse frequencies of wavelengths longer
    than original / low_freq_factor divided by factor, of those shorter than original /
    high_freq_factor kept, a smooth ramp between; q and k ([batch, heads, seq, head_dim]) turned
    by halves at each token's position id."""
    dim, theta, rs = int(cfg["head_dim"]), float(cfg["rope_theta"]), cfg["rope_scaling"]
    factor, low, high = float(rs["factor"]), float(rs["low_freq_factor"]), float(rs["high_freq_factor"])
    original = float(rs["original_max_position_embeddings"])
    positions = p["position_ids"]
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    wavelength = 2 * math.pi / inv
    smooth = (original / wavelength - low) / (high - low)
    ramp = (1 - smooth) * inv / factor + smooth * inv
    inv = torch.where(wavelength > original / low, inv / factor, torch.where(wavelength < original / high, inv, ramp))
    angles = (positions.float()[..., None] * inv)[:, None]
    return _turn_halves(p["query"], angles.cos(), angles.sin()), _turn_halves(p["key"], angles.cos(), angles.sin())


def rotary_multimodal_sections(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen2-VL's multimodal rotary embedding (M-RoPE): three position ids per token (time,
    height, width: [3, batch, seq]); the head's frequencies split in mrope_section parts, each
    turned by its own stream's position; q and k ([batch, heads, seq, head_dim]) by halves."""
    angles = _angles(p["position_ids"], p["query"].shape[-1], float(cfg["rope_theta"]))
    parts = angles.split([int(s) for s in cfg["mrope_section"]], -1)
    angles = torch.cat([part[i % 3] for i, part in enumerate(parts)], -1)[:, None]
    return _turn_halves(p["query"], angles.cos(), angles.sin()), _turn_halves(p["key"], angles.cos(), angles.sin())


def mla_rotary_split_concat(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek's multi-head latent attention around its rotary step: q's last rope dims and the
    shared k_pe turned (YaRN's frequencies, interleaved pairs) at each token's position, then q
    put back together and the shared rotary key broadcast to every head beside its k_nope."""
    nope, rope = int(cfg["nope"]), int(cfg["rope"])
    cos, sin = rope_tables(p["positions"], rope, cfg)
    cos, sin = cos[:, None], sin[:, None]
    q_nope, q_pe = p["q"].split([nope, rope], -1)
    k_pe = rotate(p["k_pe"][:, None], cos, sin, interleaved=True).expand(-1, p["k_nope"].shape[1], -1)
    return torch.cat([q_nope, rotate(q_pe, cos, sin, interleaved=True)], -1), torch.cat([p["k_nope"], k_pe], -1)


def _causal(q_len: int, k_len: int, device: Any, window: int = 0) -> torch.Tensor:
    """Which keys each query sees ([q_len, k_len]): query i sits at position k_len - q_len + i;
    with a window, only the last `window` positions up to its own."""
    qpos = torch.arange(k_len - q_len, k_len, device=device)[:, None]
    kpos = torch.arange(k_len, device=device)[None, :]
    allowed = kpos <= qpos
    return allowed & (kpos > qpos - window) if window else allowed


def scaled_masked_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """BERT's attention probabilities: scores times head_dim^-0.5, the padded keys of each
    sequence (attention_mask 0) pushed to float32's lowest, softmax in float32."""
    scores = p["scores"].float() * float(cfg["head_dim"]) ** -0.5
    padded = (1.0 - p["attention_mask"][:, None, None, :].float()) * torch.finfo(torch.float32).min
    return (scores + padded).softmax(-1).to(p["scores"].dtype)


def scaled_causal_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """GPT-2's attention probabilities: scores times head_dim^-0.5, future keys masked, softmax."""
    scores = p["scores"].float() * float(cfg["head_dim"]) ** -0.5
    allowed = _causal(scores.shape[-2], scores.shape[-1], scores.device)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1).to(p["scores"].dtype)


def sliding_window_causal_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """Mistral's attention probabilities for a chunk of queries at the end of the keys: scaled
    scores, each query seeing the last `window` positions up to its own, softmax."""
    scores = p["scores"].float() * float(cfg["head_dim"]) ** -0.5
    allowed = _causal(scores.shape[-2], scores.shape[-1], scores.device, int(p["window"]))
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1).to(p["scores"].dtype)


def _alibi_slopes(heads: int) -> list[float]:
    """ALiBi's per-head slopes: a geometric series from 2^(-8 / n) for the largest power of two n
    up to heads; further heads take every other slope of the series for 2n."""
    n = 2 ** math.floor(math.log2(heads))
    slopes = [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]
    return slopes + [2.0 ** (-8.0 * (2 * i + 1) / (2 * n)) for i in range(heads - n)]


def alibi_causal_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """BLOOM's attention probabilities: scores times head_dim^-0.5 plus each head's slope times
    the key's position (ALiBi), future keys masked, softmax in float32."""
    raw = p["scores"]
    slopes = torch.tensor(_alibi_slopes(raw.shape[1]), dtype=torch.float32, device=raw.device)
    bias = slopes[:, None, None] * torch.arange(raw.shape[-1], dtype=torch.float32, device=raw.device)
    scores = raw.float() * float(cfg["head_dim"]) ** -0.5 + bias
    allowed = _causal(raw.shape[-2], raw.shape[-1], raw.device)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1).to(raw.dtype)


def softcap_causal_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """Gemma-2's attention probabilities: scores times query_pre_attn_scalar^-0.5, soft-capped
    (cap * tanh(s / cap)), future keys masked, softmax."""
    cap = float(cfg["attn_logit_softcapping"])
    scores = p["scores"].float() * float(cfg["query_pre_attn_scalar"]) ** -0.5
    scores = cap * torch.tanh(scores / cap)
    allowed = _causal(scores.shape[-2], scores.shape[-1], scores.device)
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1).to(p["scores"].dtype)


def sink_causal_softmax(p: Params, cfg: Config) -> torch.Tensor:
    """gpt-oss's attention probabilities: scaled causal scores and one learned sink logit per head
    as an extra key that takes probability and gives no value; the sink's column dropped."""
    scores = p["scores"].float() * float(cfg["head_dim"]) ** -0.5
    allowed = _causal(scores.shape[-2], scores.shape[-1], scores.device)
    scores = scores.masked_fill(~allowed, float("-inf"))
    sinks = p["sinks"].float()[None, :, None, None].expand(scores.shape[0], -1, scores.shape[2], 1)
    joint = torch.cat([scores, sinks], -1)
    probs = (joint - joint.amax(-1, keepdim=True)).softmax(-1)
    return probs[..., :-1].to(p["scores"].dtype)


def merge_attention_states(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial attention outputs over disjoint keys ([tokens, heads, head_dim]) merged by
    their log-sum-exps ([tokens, heads], float32), as cascade and split-KV decoding do
    (FlashInfer's merge_state): weights exp(lse_i - lse), lse = logaddexp(lse_a, lse_b)."""
    lse_a, lse_b = p["lse_a"].float(), p["lse_b"].float()
    lse = torch.logaddexp(lse_a, lse_b)
    merged = p["v_a"].float() * (lse_a - lse).exp()[..., None] + p["v_b"].float() * (lse_b - lse).exp()[..., None]
    return merged.to(p["v_a"].dtype), lse


def selective_scan(p: Params, cfg: Config) -> torch.Tensor:
    """Mamba's selective scan: dt = softplus(delta + dt_bias); per channel a state of d_state
    that decays by exp(dt * A) (A = -exp(A_log)) and takes in dt * B * u at each step; the output
    C . state + D * u, gated by silu(z). The state in float32, step by step in time order."""
    u, z = p["u"].float(), p["z"].float()  # [batch, channels, seq]
    dt = F.softplus(p["delta"].float() + p["dt_bias"].float()[:, None])
    a = -torch.exp(p["A_log"].float())  # [channels, state]
    b, c = p["B"].float(), p["C"].float()  # [batch, state, seq]
    decay = torch.exp(dt[..., None] * a[:, None, :])  # [batch, channels, seq, state]
    intake = (dt * u)[..., None] * b.transpose(1, 2)[:, None]
    state = u.new_zeros(u.shape[0], u.shape[1], a.shape[1])
    ys = []
    for t in range(u.shape[-1]):
        state = decay[:, :, t] * state + intake[:, :, t]
        ys.append((state * c[:, None, :, t]).sum(-1))
    y = torch.stack(ys, -1) + u * p["D"].float()[:, None]
    return (y * F.silu(z)).to(p["u"].dtype)


def wkv_recurrence(p: Params, cfg: Config) -> torch.Tensor:
    """RWKV-4's WKV: each channel's output a weighted average of the values so far, a past token
    i weighted exp(k_i - (t - 1 - i) exp(time_decay)), the current one exp(time_first + k_t); a
    running numerator, denominator and largest exponent in float32, so no exponent overflows."""
    decay, first = -torch.exp(p["time_decay"].float()), p["time_first"].float()
    k, v = p["key"].float(), p["value"].float()  # [batch, seq, channels]
    num, den = torch.zeros_like(k[:, 0]), torch.zeros_like(k[:, 0])
    top = torch.full_like(k[:, 0], -1e38)
    outs = []
    for t in range(k.shape[1]):
        kt, vt = k[:, t], v[:, t]
        peak = torch.maximum(top, kt + first)
        old, new = torch.exp(top - peak), torch.exp(kt + first - peak)
        outs.append((old * num + new * vt) / (old * den + new))
        peak = torch.maximum(top + decay, kt)
        old, new = torch.exp(top + decay - peak), torch.exp(kt - peak)
        num, den, top = old * num + new * vt, old * den + new, peak
    return torch.stack(outs, 1).to(p["value"].dtype)
