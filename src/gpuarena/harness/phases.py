"""Wall time per phase of a run, for the record: where a verdict's fixed cost goes.

A run that judges a sub-millisecond kernel took 35 s on an H100 (issue 18); without a
breakdown nobody can tell start-up from building from measuring. The supervisor times
each phase with `Phases` and the record carries the sums (`Evaluation.phases`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

START_UP, BUILD, CORRECTNESS, TIMING, DEVICE_AUDIT, KERNEL_DURATION, TEARDOWN = (
    "start-up",
    "build",
    "correctness",
    "timing",
    "device audit",
    "ncu duration",
    "teardown",
)
ORDER = (START_UP, BUILD, CORRECTNESS, TIMING, DEVICE_AUDIT, KERNEL_DURATION, TEARDOWN)
"""The phases in the order a run meets them (the record keeps this order)."""


class Phases:
    """Seconds per phase, summed over every time a phase is entered (each workload's
    correctness, say). `moved(a, b, s)` re-books time measured inside one phase to another
    (the device audit's share of the timed rounds)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def moved(self, source: str, target: str, seconds: float) -> None:
        """Book `seconds` timed as `source` (possibly still open) to `target` instead."""
        self.add(source, -seconds)
        self.add(target, seconds)

    def record(self) -> dict[str, float]:
        """The sums in run order, rounded to ms; phases never entered are left out."""
        return {name: round(self.seconds[name], 3) for name in ORDER if name in self.seconds}


def summary(duration_s: float, phases: dict[str, float]) -> str:
    """One line: the run's wall time and its phases (`gpuarena run --verbose`, runners' logs)."""
    parts = ", ".join(f"{name} {seconds:.2f}" for name, seconds in phases.items())
    return f"{duration_s:.2f} s: {parts}" if phases else f"{duration_s:.2f} s"
