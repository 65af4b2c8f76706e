"""The WKV time mixing over a 1024-token context: decaying weighted averages of past values with a bonus for the current token, kept stable by a running maximum.

RWKV-4-Pile-7B, with the numbers of its published config (RWKV/rwkv-4-7b-pile config.json).
Written by gpuarena.dataset.fusions (scripts/make_fusions.py) in plain PyTorch from the published
architecture, not harvested; every tensor is an input."""


from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

Params = dict[str, Any]
Config = dict[str, Any]


CONFIG: Config = {}


INPUTS: dict[str, dict[str, Any]] = {
    "time_decay": {"shape": ["channels"], "init": "uniform", "range": [-5.0, 1.0], "dtype": "float32"},
    "time_first": {"shape": ["channels"], "init": "normal", "scale": 0.5, "shift": -0.5, "dtype": "float32"},
    "key": {"shape": ["batch", "seq", "channels"], "init": "act"},
    "value": {"shape": ["batch", "seq", "channels"], "init": "act"},
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


def _size(expr: str, axes: dict[str, int]) -> int:
    """An input's dimension: an axis name or a product of them ("heads*head_dim")."""
    return math.prod(axes[name] if name in axes else int(name) for name in expr.split("*"))


def reference(time_decay, time_first, key, value):
    return wkv_recurrence(dict(locals()), CONFIG)


def make_inputs(axes, dtype, device, generator):
    return draw(INPUTS, axes, dtype, device, generator)
