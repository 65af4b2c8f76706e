"""Whether a solution's solve() takes what the harness will pass it (the worker asks at build)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def signature_problem(solve: Callable[..., Any], expected: list[str]) -> str | None:
    """Why solve() cannot take the problem's arguments in order (`expected`: the inputs, then the
    destinations for a destination-passing solution), or None (also where it cannot be told:
    compiled functions, *args)."""
    try:
        params = inspect.signature(solve).parameters.values()
    except (TypeError, ValueError):  # compiled functions: cannot inspect, called positionally
        return None
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None
    names = [p.name for p in params]
    if names != expected:
        return f"solve({', '.join(names)}) must take the problem's inputs in order: solve({', '.join(expected)})"
    return None
