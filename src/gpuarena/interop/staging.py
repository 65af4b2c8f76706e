"""A folder written so that a writer killed part way leaves the old folder, the new one, or
none: the new one is written beside it (`.NAME.gpuarena-PID-...`), renamed into place, and a
folder it replaces is renamed aside first and deleted after. The next writer removes the work
folders whose process is gone (an importer killed during its check left one, which problem
discovery then found as a second copy)."""

from __future__ import annotations

import glob
import os
import re
import shutil
import tempfile
import time
from pathlib import Path


def work_prefix(out_dir: Path) -> str:
    """The prefix of this process's work folders beside out_dir: `.NAME.gpuarena-PID-`."""
    return f".{out_dir.name}.gpuarena-{os.getpid()}-"


def alive(pid: int) -> bool:
    """Whether a process of this id runs (another user's counts)."""
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return True
    except (ProcessLookupError, OverflowError):
        return False
    return True


LEGACY_STALE_S = 600
"""A work folder of an older gpuarena (`.NAME.XXXXXXXX`, no process id) untouched this long is stale."""


def clear_stale(out_dir: Path) -> list[Path]:
    """Remove the work folders beside out_dir that a writer killed before it finished left
    behind (a process that is gone, or an older gpuarena's folder untouched for
    LEGACY_STALE_S): a staging copy, or the previous folder being replaced. Returns them."""
    if not out_dir.parent.is_dir():
        return []
    ours = re.compile(rf"\.{re.escape(out_dir.name)}\.gpuarena-(\d+)-[^/]*")
    legacy = re.compile(rf"\.{re.escape(out_dir.name)}\.[a-z0-9_]{{8}}")
    removed = []
    for folder in out_dir.parent.glob(f".{glob.escape(out_dir.name)}.*"):
        if not folder.is_dir() or folder.is_symlink():
            continue
        found = ours.fullmatch(folder.name)
        if found:
            stale = not alive(int(found.group(1)))
        else:
            try:
                stale = bool(legacy.fullmatch(folder.name)) and time.time() - folder.stat().st_mtime > LEGACY_STALE_S
            except OSError:
                stale = False
        if stale:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def put_in_place(staging: Path, out_dir: Path) -> None:
    """staging renamed to out_dir. A folder already there is first renamed aside, then
    deleted: killed at any point, out_dir is the old problem, the new one, or absent (never
    half deleted), and what is left aside is cleared by the next import (clear_stale)."""
    if out_dir.exists():
        aside = Path(tempfile.mkdtemp(prefix=work_prefix(out_dir), dir=out_dir.parent))
        aside.rmdir()
        out_dir.rename(aside)
        staging.rename(out_dir)
        shutil.rmtree(aside, ignore_errors=True)
    else:
        staging.rename(out_dir)
