"""What the importers of other benchmarks' problems share: the error naming a source file, and
what became of each source (imported, written although it failed `gpuarena check`, or not)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from gpuarena.errors import GpuarenaError


class SourceError(GpuarenaError):
    """A source that cannot be imported; the message names the file and why."""

    def __init__(self, path: Path | str, message: str, fix: str | None = None):
        self.path = str(path)
        super().__init__(f"{path}: {message}" + (f" (fix: {fix})" if fix else ""))


@dataclass
class Outcome:
    """What became of one source file or folder."""

    source: Path
    status: Literal["imported", "failed-check", "error"]
    folder: Path | None = None
    """Where the problem was written (imported, or kept although it failed the check)."""
    problem_id: str = ""
    messages: list[str] = field(default_factory=list)
    """The check's findings, or the error."""
    workloads: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What `gpuarena check` noted and let pass (an input whose effect fades under the tolerance,
    outputs under atol that only the L2 bound judges): the KernelBench importer's."""
    parts: list[Outcome] = field(default_factory=list)
    """A source written as several problems (a GPU MODE task of several layouts): each one's."""
