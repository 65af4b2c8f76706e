"""A block of timed calls' raw samples, and the names of the host ranges that mark the calls
and the harness's own work: shared by the timer and the device methods that fill a block."""

from __future__ import annotations

from dataclasses import dataclass, field

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
