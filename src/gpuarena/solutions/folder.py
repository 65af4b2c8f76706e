"""A folder as text files and back: how a whole folder (a ported app, a dataset sample) travels
to the service and on to a runner, inside a Solution's sources."""

from __future__ import annotations

from pathlib import Path

from gpuarena.errors import GpuarenaError

SKIP_PARTS = frozenset({"__pycache__", ".git", ".pytest_cache", ".venv"})
"""Caches and version control: never part of what is submitted."""


def text_files(folder: Path, max_bytes: int, what: str, hint: str = "") -> dict[str, str]:
    """Every file under folder (relative path -> text), caches left out. A file that is not
    UTF-8 text, or more than max_bytes in all, is an error: nothing is dropped quietly.
    `what` names the folder in errors ("a port"); `hint` says what to do instead."""
    folder = Path(folder)
    files: dict[str, str] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or SKIP_PARTS & set(path.relative_to(folder).parts) or path.suffix == ".pyc":
            continue
        name = path.relative_to(folder).as_posix()
        try:
            files[name] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise GpuarenaError(
                f"{path}: not UTF-8 text; {what} submitted to the service holds text files only"
                + (f" ({hint})" if hint else "")
            ) from None
        total += len(files[name].encode())
        if total > max_bytes:
            raise GpuarenaError(f"{folder}: more than {max_bytes} bytes of files; submit the code, not data")
    return files


def write_files(files: dict[str, str], folder: Path, what: str) -> Path:
    """Write files (relative path -> text) into folder (new) and return it; a path that leaves
    the folder is refused."""
    folder.mkdir(parents=True, exist_ok=False)
    for name, text in files.items():
        target = (folder / name).resolve()
        if not target.is_relative_to(folder.resolve()):
            raise GpuarenaError(f"file {name!r} leaves {what}'s folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return folder
