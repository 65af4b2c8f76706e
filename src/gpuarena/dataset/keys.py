"""A problem's identity as keys (issue 48): what `identity.py` traces and `jax_identity.py` reads
from source both give, apart from either so that neither imports the other."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

Leaf = tuple[Any, ...]
"""One argument: ("T", label, dtype, shape, stride) for a tensor, ("I", n), ("V", text) otherwise."""
Call = tuple[str, tuple[Leaf, ...]]
Trace = tuple[tuple[Call, ...], tuple[str, ...]]
"""The calls in order and the labels of the tensors the reference returned."""


@dataclass
class Identity:
    """A problem's keys and what they were taken from."""

    problem: str
    level: int
    framework: str
    exact: str
    family: str
    order: list[str] = field(default_factory=list)
    """The inputs' names in first-use order (to map one problem's inputs onto another's)."""
    traced: dict[str, Trace] = field(default_factory=dict)
    """Each workload's exact trace, by workload name (PyTorch problems)."""
    error: str | None = None


def digest(value: Any) -> str:
    """A short stable hash of a key."""
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]
