"""How a recorded op's inputs were laid out in the model: the share of their bytes passed strided.

`gpuarena dataset weigh` asks it where the suite's time and the harvest's disagree: the harness
timed every input as a contiguous copy until stop 69, so an op the model ran on strided inputs (a
channels_last upsample, a rotary `cat` of transposed halves) was timed on another layout than the
model's (weights.DISAGREE)."""

from __future__ import annotations

import json
import math
from typing import Any

ITEMSIZE = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "bfloat16": 2, "float16": 2}
"""Bytes an element of a recorded dtype takes (a share needs only their ratio; others: 1)."""


def strided_share(signature: str) -> float:
    """The share of an op group's input bytes in tensors the model passed strided (not
    contiguous, dimensions of size 1 aside), from its signature's [shape, dtype, strides]
    triples; 0 for a module's (its signature is a hash) or one that does not parse."""
    try:
        parsed = json.loads(signature)
    except (TypeError, ValueError):
        return 0.0
    found: list[tuple[int, bool]] = []

    def walk(node: Any) -> None:
        if isinstance(node, list):
            if len(node) == 3 and isinstance(node[1], str) and all(isinstance(v, list) for v in (node[0], node[2])):
                shape, strides = node[0], node[2]
                if all(isinstance(v, int) for v in shape + strides) and len(shape) == len(strides):
                    size = math.prod(shape) * (ITEMSIZE.get(node[1], 1))
                    found.append((size, not _contiguous(shape, strides)))
                    return
            for child in node:
                walk(child)

    walk(parsed)
    total = sum(size for size, _ in found)
    return sum(size for size, strided in found if strided) / total if total else 0.0


def _contiguous(shape: list[int], strides: list[int]) -> bool:
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True
