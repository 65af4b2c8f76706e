"""`gpuarena dataset pull`: the samples a service accepted, written as a root of problems
(`level<N>/<name>/`, as dataset/problems is laid out) that every command taking `--root` reads,
with samples.json saying where each problem came from."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

from pydantic import BaseModel

from gpuarena.errors import GpuarenaError
from gpuarena.solutions.folder import write_files

PULL_INDEX = "samples.json"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


class DatasetSample(BaseModel):
    """An accepted sample's problem, as the service sends it (GET /api/samples/dataset)."""

    id: int
    contributor: str
    llm: str
    problem: str
    score: float | None
    reviewer: str | None
    files: dict[str, str]
    """The problem folder's files (problem.toml, reference.py, ...), relative to it."""


def _place(sample: DatasetSample, taken: set[str]) -> str:
    """level<N>/<name>, or level<N>/<name>-<id> where an earlier sample took the name; a name
    that is not a plain folder name becomes sample-<id>."""
    try:
        spec = tomllib.loads(sample.files.get("problem.toml", ""))
    except tomllib.TOMLDecodeError:
        spec = {}
    level = spec.get("level")
    name = str(spec.get("name") or sample.problem)
    name = name if _NAME.fullmatch(name) else f"sample-{sample.id}"
    base = f"level{level}" if isinstance(level, int) and 1 <= level <= 9 else "samples"
    place = f"{base}/{name}" if f"{base}/{name}" not in taken else f"{base}/{name}-{sample.id}"
    taken.add(place)
    return place


def write_pulled(samples: list[DatasetSample], output: Path, source: str) -> list[str]:
    """Write the samples' problems under output (new, empty, or an earlier pull, which is
    replaced); returns the problem ids written."""
    output = Path(output)
    if output.exists() and any(output.iterdir()):
        if not (output / PULL_INDEX).is_file():
            raise GpuarenaError(
                f"{output} is not empty and holds no {PULL_INDEX} (not an earlier pull): give a new folder"
            )
        shutil.rmtree(output)
    output.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    index = []
    for sample in sorted(samples, key=lambda s: s.id):
        place = _place(sample, taken)
        write_files(sample.files, output / place, f"sample {sample.id}'s problem")
        index.append({**sample.model_dump(exclude={"files"}), "problem": place})
    (output / PULL_INDEX).write_text(json.dumps({"source": source, "samples": index}, indent=2) + "\n")
    return [entry["problem"] for entry in index]
