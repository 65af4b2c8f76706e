"""A dataset problem's CPU-sized workloads (issue 48): machines without a GPU check every problem
on them, and a GPU's score leaves them out. An op's sizes over 32 are renumbered (`shrink`); a
fusion's, and a JAX reference's, are divided by one power of two (`scale_down`), which keeps the
relations a graph holds; where the CPU's check finds that division degenerate (an input the output
no longer depends on), `halved_factor` takes half the factor, down to the recorded sizes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

SMALL_LIMIT = 32
"""Sizes up to this stay as recorded in the small workload."""
SMALL_STEP = 8


def shrink(axes: dict[str, int]) -> dict[str, int]:
    """The small workload's axes: sizes over SMALL_LIMIT mapped, in order, onto 40, 48, 56..."""
    large = sorted({v for v in axes.values() if v > SMALL_LIMIT})
    mapped = {v: SMALL_LIMIT + SMALL_STEP * (i + 1) for i, v in enumerate(large)}
    return {k: mapped.get(v, v) for k, v in axes.items()}


SCALED_MAX = 256
SCALED_MIN = 4
LENIENT_ABOVE = 2048
SCALED_NUMEL = 1 << 20
"""Nor any input of more elements than this (a ResNet stage's 64 x 256 x 56 x 56 activations)."""


def scale_down(axes: dict[str, int], named: Sequence[int] = ()) -> dict[str, int]:
    """A fusion's small workload: every even size over SMALL_LIMIT divided by one power of two f,
    so that the sizes a module's graph relates keep their relations (hidden = heads x head_dim, a
    convolution's 224 pixels in and 56 out, a view's batch x seq), which `shrink`'s renumbering
    breaks. f doubles while the largest size is over SCALED_MAX and every even one divides by the
    next f into at least SCALED_MIN, or an input holds more than SCALED_NUMEL elements; an odd size
    (a ViT's 197 tokens) stays as it is. Bounded by the largest size alone, a ResNet layer's check
    on its small workload (64 images of 256 x 56 x 56: no size over 256) took 15 s on the CPU.
    named: the sizes a JAX reference's body names (`S(n)`, dataset/jax_sizes.py), which f must
    divide into at least SCALED_MIN too (a head's half: 64 of 128)."""
    large = [v for v in axes.values() if v > SMALL_LIMIT]
    even = [v for v in large if v % 2 == 0] + list(named)
    inputs: dict[str, list[int]] = {}
    for name, size in axes.items():  # axes are <input>_<dim>
        inputs.setdefault(name.rsplit("_", 1)[0], []).append(size)

    def too_big(f: int) -> bool:
        most = max(
            math.prod(v // f if v > SMALL_LIMIT and v % f == 0 else v for v in sizes) for sizes in inputs.values()
        )
        return max(large) // f > SCALED_MAX or most > SCALED_NUMEL

    f = 1
    while even and too_big(f) and all(v % (2 * f) == 0 and v // (2 * f) >= SCALED_MIN for v in even):
        f *= 2
    if large and max(large) // f > LENIENT_ABOVE and not named:
        # a size no power of two divides far enough (BERT's vocabulary of 30522 = 2 x 15261): the
        # LM head would stay a 96 GFLOP matmul. Divide every size over 32, rounding down: such a
        # size is seldom tied to the others.
        while max(large) // f > SCALED_MAX and min(large) // (2 * f) >= SCALED_MIN:
            f *= 2
        return {k: v // f if v > SMALL_LIMIT else v for k, v in axes.items()}
    return {k: v // f if v > SMALL_LIMIT and v % f == 0 else v for k, v in axes.items()}


SMALL_NAME = re.compile(r"^small(-\d+)?$")


def cpu_only_small(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CPU-sized workloads (`small`, and `small-N` where a merge joined several) for machines
    without a GPU alone where the recorded shapes run on one: a GPU's score is the real sizes'
    (issue 48: half of 264 problems' weight was a workload of 2.8 µs on an H200)."""
    on_gpu = any("cuda" in w.get("devices", ["cpu", "cuda"]) for w in workloads if not SMALL_NAME.match(w["name"]))
    return [{**w, "devices": ["cpu"]} if on_gpu and SMALL_NAME.match(w["name"]) else w for w in workloads]


DEGENERATE = "workload small: the output does not depend on input"
"""How the CPU's check says a small workload lost an input (problem_check.py)."""


def degenerate_small(errors: list[str], notes: Sequence[str] = ()) -> bool:
    """Whether a check failed only because the small workload made inputs irrelevant, or passed
    noting that an input's effect faded under the tolerance there (problem_check.FADED_SHARE):
    the dataset's small workload is its own derivation, and every input matters in it."""
    if errors:
        return all(error.startswith(DEGENERATE) for error in errors)
    return any(note.startswith(DEGENERATE) for note in notes)


def halved_factor(spec: dict[str, Any]) -> dict[str, Any] | None:
    """spec with its `small` workload's factor halved: the sizes `scale_down` divided by f, divided
    by f/2 (Gemma 2B's JAX decoder block divided by 32, 64 tokens of width 64, gave an output a fresh
    query weight still passed, where every input mattered at its recorded size on an H200). None
    where there is no such factor to halve: no `small`, a level-1 op's renumbered sizes, f = 1."""
    small = next((w for w in spec.get("workloads", []) if w["name"] == "small"), None)
    recorded = next((w for w in spec.get("workloads", []) if not SMALL_NAME.match(w["name"])), None)
    if small is None or recorded is None:
        return None
    full = recorded["axes"]
    divided = {k: (full[k], v) for k, v in small["axes"].items() if k in full and full[k] != v}
    factors = {size // v if v and size % v == 0 else 0 for size, v in divided.values()}
    if len(factors) != 1 or (f := factors.pop()) < 2:
        return None
    axes = {k: full[k] // (f // 2) if k in divided else v for k, v in small["axes"].items()}
    workloads = [{**w, "axes": axes} if w is small else w for w in spec["workloads"]]
    return {**spec, "workloads": workloads}
