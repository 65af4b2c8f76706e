"""The windows a workload's device audit sampled (rounds_audit.py), kept as the sampler hands
them over and turned into figures when a decision needs them: a window read by its instants
(device_audit.Span) is read with every other pending one in one request to the sampler, not one
request each."""

from __future__ import annotations

from typing import Protocol


class Sampled(Protocol):
    """A sampled window: device_audit.Window, or a Span read on first use."""

    @property
    def busy_ns(self) -> float: ...

    @property
    def read_bytes(self) -> float | None: ...


class AuditFigures:
    def __init__(self, twins: tuple[str, ...]):
        self.requests: list[tuple[Sampled, Sampled]] = []
        """Each sampled request of the solution (calls, harness work, commit) and the harness's
        block sampled just before it."""
        self.unswept: list[tuple[Sampled, Sampled]] = []
        """Each unswept request of the solution and the harness's unswept block before it."""
        self.reference: list[Sampled] = []
        """Each timed block of the reference."""
        self.twins: dict[str, list[Sampled]] = {name: [] for name in twins}
        """Each block of each twin."""

    @property
    def solution_ns(self) -> list[float]:
        return [request.busy_ns for request, _ in self.requests]

    @property
    def paired_ns(self) -> list[float]:
        """Busy ns per sampled request less its harness block's."""
        return [request.busy_ns - harness.busy_ns for request, harness in self.requests]

    @property
    def paired_bytes(self) -> list[float]:
        """Device-memory bytes read per sampled request less its harness block's (where counted)."""
        return [
            request.read_bytes - harness.read_bytes
            for request, harness in self.requests
            if request.read_bytes is not None and harness.read_bytes is not None
        ]

    @property
    def harness_bytes(self) -> list[float]:
        """Bytes read per harness block (where counted, beside `paired_bytes`)."""
        return [
            harness.read_bytes
            for request, harness in self.requests
            if request.read_bytes is not None and harness.read_bytes is not None
        ]

    @property
    def unswept_ns(self) -> list[float]:
        return [request.busy_ns - harness.busy_ns for request, harness in self.unswept]

    @property
    def reference_ns(self) -> list[float]:
        return [block.busy_ns for block in self.reference]

    def twin_ns(self, name: str) -> list[float]:
        return [block.busy_ns for block in self.twins[name]]
