"""A solution's compile caches around one run of its worker (build_cache.py keeps them): put
back before the run while the worker is idle, kept again after it. A failure either way costs a
compile, never the verdict, and is noted in the run's log."""

from __future__ import annotations

import os

from gpuarena.harness.launch import build_cache
from gpuarena.harness.launch.started import StartedWorker


def restore_caches(started: StartedWorker, solution_hash: str, notes: list[str]) -> int | None:
    """What earlier runs of this very solution compiled, put into the worker's cache folder; a
    descriptor of the folder above it, to keep the caches once the run ends, or None where the
    worker's caches are not per run."""
    if not started.caches_per_run or started.user is None:
        return None
    root = started.process.cache_root
    try:
        parent_fd = build_cache.open_parent(root, started.process.init_pid)
    except OSError as exc:
        notes.append(f"\n[gpuarena] the worker's caches could not be reached to keep them: {exc}\n")
        return None
    try:
        build_cache.restore(solution_hash, parent_fd, root.name, (started.user[0], started.user[1]))
    except OSError as exc:  # it compiles again
        notes.append(f"\n[gpuarena] the solution's kept caches could not be restored: {exc}\n")
    return parent_fd


def keep_caches(solution_hash: str, parent_fd: int, folder: str, notes: list[str]) -> None:
    """The run's compile caches kept for the solution's next run; the descriptor closed."""
    try:
        build_cache.keep(solution_hash, parent_fd, folder)
    except Exception as exc:  # the next run compiles again; the verdict stands
        notes.append(f"\n[gpuarena] the solution's caches could not be kept: {exc}\n")
    finally:
        os.close(parent_fd)
