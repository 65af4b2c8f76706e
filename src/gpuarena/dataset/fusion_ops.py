"""The plain-PyTorch pieces of the level-2 fusion problems (dataset/fusions.py): how their inputs
are drawn, activations with their gates, embeddings, data movement and quantization.

As with layer_ops, each function is copied by its source into the reference.py of the problems
that use it, so a reference imports nothing but torch: `p` holds the call's tensors by name,
`cfg` the published config's constants. Arithmetic runs in float32 from the inputs' dtype and is
rounded once to the output's dtype, as the models' fused kernels do.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from gpuarena.dataset.layer_ops import _size

Params = dict[str, Any]
Config = dict[str, Any]


def draw(
    specs: dict[str, dict[str, Any]], axes: dict[str, int], dtype: torch.dtype, device: Any, generator: Any
) -> Params:
    """Every input, drawn so that it matters: `act` (unit rows of different magnitudes, as hidden
    states), `normal` (scale, shift), `uniform` (a range), `int` (in [low, high)), `distinct`
    (per row, distinct ids of `of`: a token's experts), `perm` (distinct ids of `of`: a block
    table, a permutation), `offsets` (per row a random start, then consecutive positions below
    `high`), `prefix` (a padding mask: each row's first tokens, a quarter at least), `targets`
    (ids, a share `ignored` of them -100), `angles` (cos | sin of random angles: a rotary cache),
    `ranked` (per row a random order on a grid of step `scale`: router logits whose choices have
    margins no rounding flips), `grouped` (DeepSeek-V3's router logits, below), `packed` (random
    32-bit words of eight 4-bit values), `scalar` (a size, no tensor). Floats take the workload's
    dtype, integers int64, unless the spec names a dtype."""

    def normal(shape: list[int]) -> torch.Tensor:
        return torch.randn(shape, generator=generator, device=device)

    def uniform(shape: list[int]) -> torch.Tensor:
        return torch.rand(shape, generator=generator, device=device)

    def ints(low: int, high: int, shape: list[int]) -> torch.Tensor:
        return torch.randint(low, high, shape, generator=generator, device=device)

    out: Params = {}
    for name, spec in specs.items():
        shape = [_size(e, axes) for e in spec["shape"]]
        kind, scale, shift = spec["init"], float(spec.get("scale", 1.0)), float(spec.get("shift", 0.0))
        if kind == "scalar":
            out[name] = shape[0]
            continue
        if kind == "act":
            value = (normal(shape) + shift) * torch.exp(0.3 * normal([*shape[:-1], 1])) * scale
        elif kind == "normal":
            value = normal(shape) * scale + shift
        elif kind == "uniform":
            low, high = spec["range"]
            value = low + (high - low) * uniform(shape)
        elif kind == "int":
            value = ints(int(spec.get("low", 0)), _size(spec["high"], axes), shape)
        elif kind == "distinct":
            value = uniform([*shape[:-1], _size(spec["of"], axes)]).argsort(-1)[..., : shape[-1]]
        elif kind == "perm":
            value = uniform([_size(spec["of"], axes)]).argsort()[: math.prod(shape)].view(shape)
        elif kind == "offsets":
            start = ints(0, _size(spec["high"], axes) - shape[-1] + 1, [*shape[:-1], 1])
            value = start + torch.arange(shape[-1], device=device)
        elif kind == "prefix":
            lengths = ints(shape[-1] // 4 + 1, shape[-1] + 1, [*shape[:-1], 1])
            value = (torch.arange(shape[-1], device=device) < lengths).long()
        elif kind == "targets":
            value = ints(0, _size(spec["high"], axes), shape)
            value = value.masked_fill(uniform(shape) < float(spec["ignored"]), -100)
        elif kind == "angles":
            turns = 2 * math.pi * uniform([*shape[:-1], shape[-1] // 2])
            value = torch.cat([turns.cos(), turns.sin()], -1)
        elif kind == "ranked":
            value = (uniform(shape).argsort(-1).float() + 0.3 * uniform(shape) - 0.15) * scale + shift
        elif kind == "grouped":
            # sigmoid(logit) + bias, the choice, on a grid of step 0.9 / (2 * groups * experts) ticks:
            # 2 * groups ticks apart per place of a random order, plus a random rank of the group's,
            # so every choice and every group's sum of its two best differ by a tick at least;
            # computed in float64 and rounded once
            groups, experts = int(spec["groups"]), shape[-1]
            rank = uniform([*shape[:-1], groups]).argsort(-1).repeat_interleave(experts // groups, -1)
            ticks = 2 * groups * uniform(shape).argsort(-1) + rank
            score = 0.05 + 0.9 / (2 * groups * experts) * ticks.double() - out[spec["bias"]].double()
            value = torch.log(score / (1 - score))
        elif kind == "packed":
            nibbles = ints(0, 16, [*shape, 8])
            words = (nibbles << (4 * torch.arange(8, device=device))).sum(-1)
            value = torch.where(words >= 2**31, words - 2**32, words)
        else:
            raise ValueError(f"input {name}: unknown kind {kind}")
        floating = value.is_floating_point()
        out[name] = value.to(getattr(torch, spec["dtype"]) if "dtype" in spec else dtype if floating else torch.int64)
    return out


def silu_and_mul(p: Params, cfg: Config) -> torch.Tensor:
    """SwiGLU's gate, from the merged gate and up projection's output ([tokens, 2 * inter]):
    silu(gate) * up, as vLLM's silu_and_mul computes it."""
    gate, up = p["gate_up"].float().chunk(2, -1)
    return (F.silu(gate) * up).to(p["gate_up"].dtype)


def gelu_tanh_and_mul(p: Params, cfg: Config) -> torch.Tensor:
    """GeGLU's gate: gelu(gate) by the tanh approximation (gelu_pytorch_tanh), times up."""
    return (F.gelu(p["gate"].float(), approximate="tanh") * p["up"].float()).to(p["gate"].dtype)


def silu_alpha_clamped_and_mul(p: Params, cfg: Config) -> torch.Tensor:
    """gpt-oss's expert activation: gate and up interleaved in one projection's output, the gate
    clamped from above and up on both sides at swiglu_limit, gate * sigmoid(alpha * gate) (a
    sigmoid-weighted linear unit with alpha 1.702), times (up + 1)."""
    x = p["gate_up"].float()
    limit, alpha = float(cfg["swiglu_limit"]), float(cfg["alpha"])
    gate, up = x[..., ::2].clamp(max=limit), x[..., 1::2].clamp(-limit, limit)
    return ((up + 1) * gate * torch.sigmoid(alpha * gate)).to(p["gate_up"].dtype)


def bias_gelu(p: Params, cfg: Config) -> torch.Tensor:
    """The intermediate dense's bias added and the exact (erf) GELU, one pass (Megatron's
    bias_gelu fusion on BERT's MLP)."""
    return F.gelu(p["x"].float() + p["bias"].float()).to(p["x"].dtype)


def bias_gelu_tanh(p: Params, cfg: Config) -> torch.Tensor:
    """GPT-2's c_fc bias and gelu_new, written as its tanh formula:
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x = p["x"].float() + p["bias"].float()
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return (0.5 * x * (1.0 + torch.tanh(inner))).to(p["x"].dtype)


def channel_bias_hardswish(p: Params, cfg: Config) -> torch.Tensor:
    """A convolution's per-channel bias (its batch norm folded in) and hard-swish,
    x * relu6(x + 3) / 6, over [batch, channels, h, w] (MobileNetV3's HS blocks)."""
    x = p["x"].float() + p["bias"].float()[:, None, None]
    return F.hardswish(x).to(p["x"].dtype)


def squeeze_excite_scale(p: Params, cfg: Config) -> torch.Tensor:
    """Squeeze-and-excitation's last step: each channel of x ([batch, channels, h, w]) scaled by
    the sigmoid of its excitation logit ([batch, channels], the second 1x1 convolution's output)."""
    gate = torch.sigmoid(p["excite"].float())[:, :, None, None]
    return (p["x"].float() * gate).to(p["x"].dtype)


def layer_scale_residual(p: Params, cfg: Config) -> torch.Tensor:
    """ConvNeXt's block end: the branch (channels last, [batch, h, w, channels]) scaled per channel
    by gamma, brought to channels first, and added to the block's input."""
    branch = (p["branch"].float() * p["gamma"].float()).permute(0, 3, 1, 2)
    return (p["x"].float() + branch).to(p["x"].dtype)


def embedding_scaled(p: Params, cfg: Config) -> torch.Tensor:
    """Gemma's token embedding: the table's rows times sqrt(hidden), the normaliser rounded to the
    table's dtype first, as the model does."""
    rows = p["table"][p["input_ids"]]
    normaliser = torch.tensor(p["table"].shape[-1] ** 0.5, dtype=rows.dtype, device=rows.device)
    return rows * normaliser


def embedding_word_position_type_sum(p: Params, cfg: Config) -> torch.Tensor:
    """BERT's embeddings before their LayerNorm: word, token type and position (0..seq-1) rows,
    summed in float32."""
    seq = p["input_ids"].shape[1]
    total = p["word"][p["input_ids"]].float() + p["token_type"][p["token_type_ids"]].float()
    return (total + p["position"][:seq].float()).to(p["word"].dtype)


def embedding_class_token_position(p: Params, cfg: Config) -> torch.Tensor:
    """ViT's embeddings after the patch projection: the class token put first and the learned
    position embedding added."""
    patches = p["patches"]
    tokens = torch.cat([p["cls_token"].expand(patches.shape[0], -1, -1), patches], 1)
    return (tokens.float() + p["position"].float()).to(patches.dtype)


def paged_kv_gather(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """A paged KV cache ([blocks, block_size, kv_heads, head_dim]) read out into each sequence's
    contiguous keys and values, block by block as its block table lists them (vLLM's layout)."""
    table = p["block_table"].long()
    return p["key_cache"][table].flatten(1, 2), p["value_cache"][table].flatten(1, 2)


def window_reverse_shift_residual(p: Params, cfg: Config) -> torch.Tensor:
    """Swin's shifted-window block end: the attention's windows ([batch * windows, window^2, dim])
    put back into the image, the cyclic shift undone (a roll by shift_size), the shortcut added."""
    ws, shift = int(cfg["window_size"]), int(cfg["shift_size"])
    shortcut = p["shortcut"]
    batch, length, dim = shortcut.shape
    side = math.isqrt(length)
    x = p["attn_windows"].view(batch, side // ws, side // ws, ws, ws, dim).permute(0, 1, 3, 2, 4, 5)
    x = torch.roll(x.reshape(batch, side, side, dim), (shift, shift), (1, 2))
    return (shortcut.float() + x.reshape(batch, length, dim).float()).to(shortcut.dtype)


def quantize_fp8_per_token_group(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3's dynamic activation quantization: each token's groups of group_size channels
    scaled by amax / 448 (e4m3's largest) and cast to float8_e4m3fn; the scales are the second output."""
    groups = p["x"].float().unflatten(-1, (-1, int(cfg["group_size"])))
    largest = float(cfg["fp8_max"])
    scale = groups.abs().amax(-1, keepdim=True).clamp_min(1e-10) / largest
    q = (groups / scale).clamp(-largest, largest).to(torch.float8_e4m3fn)
    return q.flatten(-2), scale[..., 0]


def dequantize_awq_int4(p: Params, cfg: Config) -> torch.Tensor:
    """An AWQ (GEMM layout) weight back to float16: eight 4-bit values per int32 word, packed in
    the order 0, 2, 4, 6, 1, 3, 5, 7, for the weight and its zero points; (q - zero) * scale per
    group of group_size input rows."""
    shifts = 4 * torch.tensor([0, 4, 1, 5, 2, 6, 3, 7], dtype=torch.int32, device=p["qweight"].device)

    def unpack(words: torch.Tensor) -> torch.Tensor:
        return ((words[..., None] >> shifts) & 15).flatten(-2)

    group = int(cfg["group_size"])
    zeros = unpack(p["qzeros"]).repeat_interleave(group, 0)
    scales = p["scales"].float().repeat_interleave(group, 0)
    return ((unpack(p["qweight"]) - zeros).float() * scales).to(p["scales"].dtype)
