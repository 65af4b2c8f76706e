"""RoPE by adjacent pairs on the first 64 of each head's 256 dims, q and k.

GPT-J-6B, with the numbers of its published config (EleutherAI/gpt-j-6b config.json).
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
    "rotary_dim": 64,
    "rope_theta": 10000.0
}


INPUTS: dict[str, dict[str, Any]] = {
    "query": {"shape": ["batch", "seq", "heads", "head_dim"], "init": "act"},
    "key": {"shape": ["batch", "seq", "heads", "head_dim"], "init": "act"},
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


def _angles(positions: torch.Tensor, dim: int, theta: float) -> torch.Tensor:
    """Rotary angles [..., dim / 2]: float32 positions times theta^(-2i / dim)."""
    inv = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device) / dim)
    return positions.float()[..., None] * inv


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


def _size(expr: str, axes: dict[str, int]) -> int:
    """An input's dimension: an axis name or a product of them ("heads*head_dim")."""
    return math.prod(axes[name] if name in axes else int(name) for name in expr.split("*"))


def reference(query, key):
    return rotary_interleaved_partial(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw(INPUTS, axes, dtype, device, generator)
