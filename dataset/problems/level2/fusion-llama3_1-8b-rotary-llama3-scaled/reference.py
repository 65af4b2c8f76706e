"""RoPE with the llama3 frequency scaling (factor 8, low/high frequency factors 1 and 4) computed from position ids up to 131072.

Llama-3.1-8B, with the numbers of its published config (meta-llama/Llama-3.1-8B config.json).
Written by gpuarena.dataset.fusions (scripts/make_fusions.py) in plain PyTorch from the published
architecture, not harvested; every tensor is an input."""


from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

Params = dict[str, Any]
Config = dict[str, Any]


CONFIG: Config = {
    "head_dim": 128,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192
    }
}


INPUTS: dict[str, dict[str, Any]] = {
    "query": {"shape": ["batch", "heads", "seq", "head_dim"], "init": "act"},
    "key": {"shape": ["batch", "kv_heads", "seq", "head_dim"], "init": "act"},
    "position_ids": {"shape": ["batch", "seq"], "init": "offsets", "high": "max_positions"},
}


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


def _turn_halves(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The rotate-half (GPT-NeoX) rotation of x's last dim by angles whose cos and sin cover half
    of it, in float32, rounded back."""
    x1, x2 = x.float().chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)


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


def _size(expr: str, axes: dict[str, int]) -> int:
    """An input's dimension: an axis name or a product of them ("heads*head_dim")."""
    return math.prod(axes[name] if name in axes else int(name) for name in expr.split("*"))


def reference(query, key, position_ids):
    return rotary_llama3_scaled(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw(INPUTS, axes, dtype, device, generator)
