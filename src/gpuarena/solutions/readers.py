"""Solution readers: how a one-file Python source or a folder becomes a Solution, for formats
that are not solutions/'s own (issue 50: registered, not sniffed by the loader).

A reader says whether it `accepts` what it is shown and `load`s it. There are two kinds:

- a source reader (`kind = "source"`) sees a .py file's name and text, from a path or an
  upload: a KernelBench solution (class ModelNew, no solve: interop/kernelbench_solution.py),
  then a GPU MODE submission (custom_kernel(data), no solve: interop/gpumode_solution.py),
  then any other .py file (solve() in it: the native reader, solutions/loader.py);
- a folder reader (`kind = "folder"`) sees a folder: a ported app's (app.toml, no
  solution.toml: migration/port_reader.py), then an imported FlashInfer-Trace solution's (its
  flashinfer.json: interop/flashinfer_reader.py), then any other (solution.toml: the native
  reader, solutions/loader.py).

Readers are tried in that order, which their `order` states (lowest first; the native readers
come last and accept anything), whatever the order they were registered in; the first that
accepts loads. Packs (.json) are solutions/'s own format only and need no reader.

solutions/ never imports the features that register readers: gpuarena/solution_readers.py
imports them all, and whatever loads solutions (the CLI's commands, the service's uploads)
imports it first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from gpuarena.solutions.model import Solution


class SourceReader(Protocol):
    """Reads a one-file Python solution: its file name and its text."""

    kind: Literal["source"]
    name: str
    """Names the format (in listings and tests)."""
    order: int
    """Where it is tried among the source readers: lowest first."""

    def accepts(self, filename: str, source: str) -> bool:
        """Whether this file is in the reader's format."""
        ...

    def load(self, filename: str, source: str) -> Solution:
        """The solution; FormatError where it is not a valid one."""
        ...


class FolderReader(Protocol):
    """Reads a solution folder."""

    kind: Literal["folder"]
    name: str
    """Names the format (in listings and tests)."""
    order: int
    """Where it is tried among the folder readers: lowest first."""

    def accepts(self, folder: Path) -> bool:
        """Whether this folder is in the reader's format."""
        ...

    def load(self, folder: Path) -> Solution:
        """The solution; FormatError (or the format's own GpuarenaError) where it is not a valid one."""
        ...


_SOURCE: list[SourceReader] = []
_FOLDER: list[FolderReader] = []


def register(reader: SourceReader | FolderReader) -> None:
    """Add a reader (once: registering one of the same name again replaces it)."""
    if reader.kind == "source":
        _SOURCE[:] = sorted([r for r in _SOURCE if r.name != reader.name] + [reader], key=lambda r: r.order)
    else:
        _FOLDER[:] = sorted([r for r in _FOLDER if r.name != reader.name] + [reader], key=lambda r: r.order)


def source_readers() -> list[SourceReader]:
    """The source readers registered, in the order they are tried."""
    return list(_SOURCE)


def folder_readers() -> list[FolderReader]:
    """The folder readers registered, in the order they are tried."""
    return list(_FOLDER)


def source_reader(filename: str, source: str) -> SourceReader:
    """The first source reader that accepts this file (the native one accepts any)."""
    return next(r for r in _SOURCE if r.accepts(filename, source))


def folder_reader(folder: Path) -> FolderReader:
    """The first folder reader that accepts this folder (the native one accepts any)."""
    return next(r for r in _FOLDER if r.accepts(folder))
