"""MLA's rotary step: q's 64 rope dims and the shared k_pe turned with YaRN frequencies, q reassembled, k_pe broadcast beside every head's k_nope.

DeepSeek-V3, with the numbers of its published config (deepseek-ai/DeepSeek-V3 config.json).
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
    "nope": 128,
    "rope": 64,
    "rope_theta": 10000.0,
    "yarn": {
        "factor": 40.0,
        "original_max_position": 4096,
        "beta_fast": 32,
        "beta_slow": 1,
        "mscale_all_dim": 1.0
    }
}


INPUTS: dict[str, dict[str, Any]] = {
    "q": {"shape": ["tokens", "heads", "qk_dim"], "init": "act"},
    "k_nope": {"shape": ["tokens", "heads", "nope"], "init": "act"},
    "k_pe": {"shape": ["tokens", "rope"], "init": "act"},
    "positions": {"shape": ["tokens"], "init": "int", "high": "max_positions"},
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


def _size(expr: str, axes: dict[str, int]) -> int:
    """An input's dimension: an axis name or a product of them ("heads*head_dim")."""
    return math.prod(axes[name] if name in axes else int(name) for name in expr.split("*"))


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


def reference(q, k_nope, k_pe, positions):
    return mla_rotary_split_concat(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw(INPUTS, axes, dtype, device, generator)
