"""A problem folder as data: its files as text, hashed, so a server can store it and a runner
on another machine can rebuild the exact folder it was given."""

from __future__ import annotations

from pathlib import Path

from gpuarena.contracts.packed import MAX_PROBLEM_BYTES, PackedProblem, evaluation_hash
from gpuarena.errors import FormatError
from gpuarena.problems.loader import Problem, load_problem

_SKIP_PARTS = {"__pycache__", ".git", ".pytest_cache"}


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
