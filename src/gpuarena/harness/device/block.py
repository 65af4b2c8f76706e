"""A block of timed calls' raw samples, the names of the host ranges that mark the calls and
the harness's own work, and what a device's method of timing a block asks of the timer:
shared by the timer (timing.py) and the device methods that fill a block (the backends)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

CALL_RANGE = "gpuarena::timed_call"
HARNESS_RANGE = "gpuarena::harness"
"""The harness's own work between calls (cache sweeps, poisoning, copying outputs out): what
is launched in it is nobody's. Anything else launched outside the calls' windows is billed
to the call before it (work a solution defers past its return)."""


@dataclass
class BlockSamples:
    device_ns: list[int] = field(default_factory=list)
    e2e_ns: list[int] = field(default_factory=list)
    method: str = ""


class BlockTimer(Protocol):
    """The timer as a backend's time_block uses it (timing.Timer is one): the backends are
    below the timer, which looks them up."""

    method: str

    def between(self) -> None:
        """The harness's step between two calls (cache sweeps)."""

    def timed_call(self, call: Callable[[int], Any], i: int) -> tuple[Any, int]:
        """call(i) and the host's nanoseconds from its start until the device finished it."""

    def synchronize(self) -> None:
        """Wait for the device."""
