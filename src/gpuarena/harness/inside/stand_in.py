"""The harness's own work on stand-in buffers: a solve() that does nothing on tiny inputs, which
the calibration (calibration.py) runs through the worker's `time` code before any solution is
loaded, to measure the harness's share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def stand_in_buffers(
    input_names: list[str], output_names: list[str], device: torch.device
) -> tuple[list[dict[str, Any]], list[list[torch.Tensor]]]:
    """One set of tiny inputs and destinations under the problem's names: the harness's per-call
    work on them (checks, the loop, the copy) without the data's share."""
    sets = [{name: torch.zeros(16, device=device) for name in input_names}]
    return sets, [[torch.zeros(16, device=device) for _ in output_names]]


def no_op_solve(convention: str, outs: list[torch.Tensor]) -> Callable[..., Any]:
    """A solve() that does no work: None where it writes into destinations, else ready outputs."""
    ready = [torch.empty_like(o) for o in outs]

    def solve(*_: Any) -> Any:
        if convention == "destination":
            return None
        return ready[0] if len(ready) == 1 else tuple(ready)

    return solve
