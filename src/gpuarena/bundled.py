"""Where the problems shipped with gpuarena live (no torch here: the sandbox's view needs the
folder before a worker starts, and `gpuarena run` starts its worker before importing torch)."""

from __future__ import annotations

from pathlib import Path


def bundled_root() -> Path:
    """The problems shipped with gpuarena (in the wheel, or the repository's problems/ folder)."""
    packaged = Path(__file__).resolve().parent / "bundled_problems"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "problems"


def bundled_redteam() -> Path:
    """The red-team corpus shipped with gpuarena (in the wheel, or the repository's redteam/ folder),
    so that `gpuarena redteam` runs it wherever gpuarena is installed."""
    packaged = Path(__file__).resolve().parent / "bundled_redteam"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[2] / "redteam"
