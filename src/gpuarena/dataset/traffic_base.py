"""What the bytes and FLOPs derivation (traffic.py, traffic_jax.py) shares: its error, its
record, and a workload's inputs as fake tensors (shapes and dtypes, no data)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload


class TrafficError(Exception):
    """The formulas could not be derived (the reason is the message)."""


@dataclass
class Derived:
    """A problem's derived figures: formulas (None where none could be derived) and, per workload
    name, the (bytes, flops) a concrete trace of the workload counts."""

    bytes: str | None = None
    flops: str | None = None
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def workload_figures(self) -> dict[str, dict[str, int]]:
        """Per workload name, the traced figures it carries itself: those no formula covers
        (a merged problem's shapes, each specialised on other axes of size 1); nothing where
        the trace failed."""
        own = [key for key, formula in (("bytes", self.bytes), ("flops", self.flops)) if formula is None]
        if not own or not self.complete:
            return {}
        return {
            name: {key: int(count[("bytes", "flops").index(key)]) for key in own} for name, count in self.counts.items()
        }

    @property
    def complete(self) -> bool:
        """Whether every workload gets both figures, from a formula or its own count."""
        return self.reason is None and ((self.bytes is not None and self.flops is not None) or bool(self.counts))


def fake_inputs(problem: Problem, workload: Workload) -> dict[str, Any]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        generator = torch.Generator(device="cpu").manual_seed(0)
        return problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)
