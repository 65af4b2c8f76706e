"""Problems written from published configs rather than harvested (the whole layers, the level-2
fusions): their folders under a problem root and their entries in a dataset's index, the same
way for every generator."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from gpuarena.dataset.assemble import Dataset, Entry, _write, dump_problem_toml

WEIGHT = 0.1
"""Each written problem's flat weight: no harvest measured its share of a model's time."""


def write_folder(folder: Path, spec: dict[str, Any], source: str) -> Path:
    """One problem folder, problem.toml and reference.py (replacing an earlier one)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "problem.toml").write_text(dump_problem_toml(spec))
    (folder / "reference.py").write_text(source)
    return folder


def clear(root: Path, prefix: str) -> None:
    """The folders of earlier runs (prefix*) under root's levels, before every one is written again."""
    for old in sorted(Path(root).glob(f"level*/{prefix}*")):
        shutil.rmtree(old)


def register(root: Path, titles: dict[str, str]) -> Dataset | None:
    """List the problems (level/name -> its model's title) in root/dataset.json as kept, replacing
    earlier entries of theirs, each with the flat weight and its published config as its harvest;
    nothing where root is not a dataset."""
    index = Path(root) / "dataset.json"
    if not index.is_file():
        return None
    dataset = Dataset.model_validate_json(index.read_text())
    entries = [e for e in dataset.entries if e.problem not in titles]
    entries += [
        Entry(problem=problem, status="kept", weight=WEIGHT, harvests=[f"published config {title}"])
        for problem, title in titles.items()
    ]
    return _write(root, dataset.harvests, entries)
