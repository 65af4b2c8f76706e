"""Where the problems shipped with gpuarena live, and the ids a server knows problems by (no torch
here: the sandbox's view needs the folder before a worker starts, `gpuarena run` starts its worker
before importing torch, and the client commands never import it)."""

from __future__ import annotations

from pathlib import Path

PROBLEM_FILE = "problem.toml"


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


def problem_id(name: str | Path) -> str:
    """The id a server knows a problem by: an id as given; for a local problem folder, its path
    below the bundled problems or below the nearest folder named `problems` (as the bundled
    ones are laid out: problems/level1/softmax -> level1/softmax), else its folder name."""
    path = Path(name)
    if not (path / PROBLEM_FILE).is_file():
        return str(name)
    folder = path.resolve()
    for root in (bundled_root().resolve(), *(p for p in folder.parents if p.name == "problems")):
        if folder.is_relative_to(root) and folder != root:
            return folder.relative_to(root).as_posix()
    return folder.name
