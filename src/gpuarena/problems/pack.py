"""A problem folder as data: its files as text, hashed, so a server can store it and a runner
on another machine can rebuild the exact folder it was given."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuarena.errors import FormatError
from gpuarena.problems.loader import Problem, load_problem

MAX_PROBLEM_BYTES = 4_000_000
_SKIP_PARTS = {"__pycache__", ".git", ".pytest_cache"}


class PackedProblem(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    id: str
    """The problem's id (its folder path under the problem root, e.g. level1/softmax)."""
    files: dict[str, str]
    """Relative path -> text, for every file in the folder."""
    hash: str
    """SHA-256 over the files that decide evaluation (all but Markdown): the version's identity."""


def evaluation_hash(files: dict[str, str]) -> str:
    relevant = {path: text for path, text in sorted(files.items()) if not path.endswith(".md")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def pack_problem(problem: Problem) -> PackedProblem:
    files: dict[str, str] = {}
    total = 0
    for path in sorted(problem.path.rglob("*")):
        if not path.is_file() or _SKIP_PARTS & set(path.parts) or path.suffix == ".pyc":
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise FormatError(path, None, "is not UTF-8 text", "a problem folder holds text files only") from None
        total += len(text)
        if total > MAX_PROBLEM_BYTES:
            raise FormatError(
                problem.path,
                None,
                f"holds more than {MAX_PROBLEM_BYTES} bytes",
                "keep data out of problem folders; make_inputs() generates inputs",
            )
        files[path.relative_to(problem.path).as_posix()] = text
    return PackedProblem(id=problem.id, files=files, hash=evaluation_hash(files))


def unpack_problem(packed: PackedProblem, cache: Path) -> Problem:
    """Write the folder under cache/<hash>/<id> (once) and load it with the same id."""
    if evaluation_hash(packed.files) != packed.hash:
        raise FormatError(packed.id, "hash", "does not match the files", "the problem was altered in transit")
    root = cache / packed.hash
    folder = root / packed.id
    if not folder.resolve().is_relative_to(root.resolve()) or not packed.id.strip("/."):
        raise FormatError(
            packed.id, "id", "is not a folder path under the problem root", "use an id like level1/softmax"
        )
    for relative, text in packed.files.items():
        target = (folder / relative).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise FormatError(packed.id, "files", f"path {relative!r} leaves the problem folder", "use relative paths")
        if not target.exists() or target.read_text() != text:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    return load_problem(folder, root=root)
