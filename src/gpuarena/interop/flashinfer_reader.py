"""The folder reader for an imported FlashInfer-Trace solution (one with flashinfer.json beside
its solution.toml): read as any solution folder, it keeps the name it was imported with, so its
records' traces and `gpuarena export solution` name it alike, and FlashInfer-Bench links them.

This module imports nothing heavy: interop's models (flashinfer_sidecar.py, 90 ms of imports)
load only for an imported solution.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from gpuarena.errors import FormatError
from gpuarena.solutions.loader import MANIFEST_FILE, from_folder, validated_solution
from gpuarena.solutions.model import Solution
from gpuarena.solutions.readers import register

IMPORTED_SIDECAR = "flashinfer.json"
"""What `gpuarena import flashinfer-solution` keeps beside an imported solution
(flashinfer_sidecar.py's SIDECAR)."""


def imported_name(folder: Path) -> str:
    """An imported solution's name, as its sidecar keeps it (the folder's where the sidecar names none)."""
    from gpuarena.interop.flashinfer_sidecar import read_solution_sidecar

    try:
        name = (read_solution_sidecar(folder) or {}).get("name")
    except FormatError:  # said where it matters: `gpuarena export solution`
        return folder.name
    return name if isinstance(name, str) and name else folder.name


class FlashInferReader:
    """A folder holding flashinfer.json (tried after a ported app's)."""

    kind: Literal["folder"] = "folder"
    name = "flashinfer"
    order = 20

    def accepts(self, folder: Path) -> bool:
        return (folder / IMPORTED_SIDECAR).is_file()

    def load(self, folder: Path) -> Solution:
        solution = from_folder(folder)  # its errors first, as for any folder
        name = imported_name(folder)
        if name == solution.name:
            return solution
        return validated_solution(
            folder / MANIFEST_FILE,
            "see docs/formats.md",
            name=name,
            manifest=solution.manifest,
            sources=solution.sources,
        )


register(FlashInferReader())
