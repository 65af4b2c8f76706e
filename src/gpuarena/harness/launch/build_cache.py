"""A solution's compile caches, kept between its own runs and no one else's.

A worker of a user of its own (a new uid per run) compiles into its working folder (Triton's
kernels and launcher, torch extensions, gpuarena's CUDA builds: worker_env.CACHE_VARIABLES), a
private tmpfs gone with the sandbox, so every run of a Triton solution compiled it again and
every run of an inline CUDA solution built it again (85-93 s on an H100, issue 18). The
supervisor now keeps that folder after a run, under the solution's content hash, and puts it
back before the next run of the same solution builds: a run only ever sees what earlier runs
of the very same code left, nothing of another solution's.

The supervisor reaches the folder through a directory descriptor it opens while the worker
is idle (before any solution code runs: `open_workdir`) and reads it only once every process
of the sandbox is gone, so nothing changes under it. What it keeps is what compilers make and
nothing else: regular files of the known kinds (KEPT_SUFFIXES), found by an iterative walk
with descriptors that never follows a link (a worker may plant them) and stops at MAX_DEPTH
and MAX_ENTRIES (a 1,500-deep chain of folders made the recursive walk raise RecursionError
and took the supervisor down), counted in the blocks they take on disk (a sparse 1.9 GiB file
costs the sandbox nothing and would be kept as 1.9 GiB of zeros, so a file much larger than
its blocks is not kept), up to MAX_BYTES a solution and QUOTA_BYTES for all of them, the
least recently used going first.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from gpuarena.cache import cache_dir

MAX_BYTES = 1 << 30
"""A solution's caches above this (in blocks on disk) are not kept (its next run compiles again)."""
QUOTA_BYTES = 16 << 30
"""All solutions' kept caches together (GPUARENA_BUILD_CACHE_QUOTA, in bytes, sets another):
beyond it the least recently used go."""
MAX_DEPTH = 16
"""Folders deeper than this are not kept (Triton's cache is two deep, a torch extension's build three)."""
MAX_ENTRIES = 20_000
"""A cache folder with more entries than this is not kept at all."""
KEPT_SUFFIXES = (
    *(".so", ".o", ".a", ".cubin", ".ptx", ".fatbin", ".hsaco", ".json"),  # libraries, objects, kernels, metadata
    *(".ttir", ".ttgir", ".llir", ".amdgcn", ".source"),  # Triton's stages
    *(".ninja", ".ninja_deps", ".ninja_log", ".cu", ".cpp", ".c", ".h", ".cuh"),  # torch extensions' builds
)
"""The names of what compilers make; any other file is the solution's own, and is not kept."""
SPARSE_SLACK = 1 << 20
"""A file may be this much larger than the blocks it takes (its last block's slack, a hole or two)."""
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class _TooMuch(Exception):
    """The folder is deeper or larger than a compiler's cache."""


def quota_bytes() -> int:
    try:
        return int(os.environ.get("GPUARENA_BUILD_CACHE_QUOTA", QUOTA_BYTES))
    except ValueError:
        return QUOTA_BYTES


def store(solution_hash: str) -> Path:
    return cache_dir() / "solution-caches" / solution_hash


def open_parent(cache_root: Path, sandbox_pid: int | None) -> int:
    """A descriptor of the folder holding the worker's caches, as the worker sees it: inside its
    sandbox (its private /tmp, a tmpfs only its mount namespace shows, reached through
    /proc/PID/root) or, unsandboxed, the folder itself. It keeps the folder readable after the
    sandbox is gone."""
    path = f"/proc/{sandbox_pid}/root{cache_root.parent}" if sandbox_pid else str(cache_root.parent)
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def restore(solution_hash: str, parent_fd: int, folder: str, owner: tuple[int, int] | None) -> int:
    """Put the solution's kept caches into the worker's cache folder (`folder` in the folder of
    parent_fd), owned by the worker's user; the number of files."""
    source = store(solution_hash)
    if not source.is_dir():
        return 0
    os.utime(source)  # used now: the quota removes the least recently used first
    count = 0
    for root, _, files in os.walk(source):  # the supervisor's own folder: nothing planted
        relative = Path(root).relative_to(source)
        folder_fd = _folder(parent_fd, Path(folder) / relative, owner)
        try:
            for name in files:
                with open(os.path.join(root, name), "rb") as reader:
                    _write(reader, folder_fd, name, os.fstat(reader.fileno()), owner)
                count += 1
        finally:
            os.close(folder_fd)
    return count


def keep(solution_hash: str, parent_fd: int, folder: str) -> int:
    """Keep the worker's caches for the solution's next run, replacing what was kept; the
    number of files, 0 when there was nothing or too much. Call once the sandbox is gone."""
    try:
        top = os.open(folder, _READ | os.O_DIRECTORY, dir_fd=parent_fd)
    except OSError:
        return 0  # none, or a link
    try:
        try:
            found = _compiled(top)
        except _TooMuch:
            return 0
        if not found or sum(blocks for _, _, blocks in found) > MAX_BYTES:
            return 0
        target = store(solution_hash)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = Path(tempfile.mkdtemp(prefix=f"{solution_hash[:16]}-", dir=target.parent))
        try:
            count = _copy_out(top, found, partial)
            old = target.with_name(target.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            if target.exists():
                target.rename(old)
            partial.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        expire(quota_bytes())
        return count
    finally:
        os.close(top)


def expire(quota: int) -> list[str]:
    """Remove the least recently used solutions' caches until all of them fit in `quota`
    bytes (blocks on disk); the hashes removed."""
    root = store("x").parent
    try:
        kept = [(entry.stat().st_mtime, entry.name, _blocks(Path(entry.path))) for entry in os.scandir(root)]
    except OSError:
        return []
    total, removed = sum(size for _, _, size in kept), []
    for _, name, size in sorted(kept):
        if total <= quota:
            break
        shutil.rmtree(root / name, ignore_errors=True)
        total -= size
        removed.append(name)
    return removed


def _blocks(folder: Path) -> int:
    """Bytes on disk under one of the supervisor's own kept folders."""
    total = 0
    for path in folder.rglob("*"):  # the supervisor's own copy: no links, a compiler's depth
        try:
            total += path.lstat().st_blocks * 512
        except OSError:
            pass
    return total


def _walk(top: int) -> Iterator[tuple[Path, int, list[str]]]:
    """(folder relative to top, a descriptor of it, its regular files), folder by folder: an
    explicit stack, never into a link, at most MAX_DEPTH deep; _TooMuch past MAX_ENTRIES."""
    stack = [(Path("."), os.dup(top), 0)]
    entries = 0
    try:
        while stack:
            relative, fd, depth = stack.pop()
            try:
                files, folders = [], []
                with os.scandir(fd) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > MAX_ENTRIES:
                            raise _TooMuch
                        if entry.is_dir(follow_symlinks=False):
                            folders.append(entry.name)
                        elif entry.is_file(follow_symlinks=False):
                            files.append(entry.name)
                yield relative, fd, files
                if depth < MAX_DEPTH:
                    for name in folders:
                        try:
                            stack.append((relative / name, os.open(name, _READ | os.O_DIRECTORY, dir_fd=fd), depth + 1))
                        except OSError:
                            continue  # replaced by a link meanwhile
            finally:
                os.close(fd)
    finally:
        for _, fd, _ in stack:
            os.close(fd)


def _compiled(top: int) -> list[tuple[Path, str, int]]:
    """What compilers made under top: (folder, name, bytes on disk) of each regular file of a
    kept kind whose size is its blocks' (not a sparse file)."""
    found = []
    for relative, fd, files in _walk(top):
        for name in files:
            if not name.endswith(KEPT_SUFFIXES):
                continue
            try:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            blocks = info.st_blocks * 512
            if stat.S_ISREG(info.st_mode) and info.st_size <= blocks + SPARSE_SLACK:
                found.append((relative, name, blocks))
    return found


def _copy_out(top: int, found: list[tuple[Path, str, int]], target: Path) -> int:
    count = 0
    for relative, name, _ in found:
        try:
            folder_fd = _folder(top, relative, None, make=False)
        except OSError:
            continue
        try:
            fd = os.open(name, _READ, dir_fd=folder_fd)
        except OSError:
            os.close(folder_fd)
            continue  # a link now
        try:
            with os.fdopen(fd, "rb") as reader:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    continue  # a pipe, a device
                destination = target / relative
                destination.mkdir(mode=0o700, parents=True, exist_ok=True)
                out_fd = os.open(destination, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    _write(reader, out_fd, name, info, None)
                finally:
                    os.close(out_fd)
                count += 1
        finally:
            os.close(folder_fd)
    return count


def _folder(base_fd: int, relative: Path, owner: tuple[int, int] | None, make: bool = True) -> int:
    """A descriptor of base/relative, each part made (0700, owned by `owner`) where missing
    (unless `make` is false) and opened without following links."""
    fd = os.dup(base_fd)
    for part in relative.parts:
        try:
            if make:
                os.mkdir(part, 0o700, dir_fd=fd)
                if owner is not None:
                    os.chown(part, *owner, dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            pass
        try:
            next_fd = os.open(part, _READ | os.O_DIRECTORY, dir_fd=fd)
        finally:
            os.close(fd)
        fd = next_fd
    return fd


def _write(reader, folder_fd: int, name: str, info: os.stat_result, owner: tuple[int, int] | None) -> None:
    """The file's bytes, its executable bit and its times (a build tool compares them)."""
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder_fd)
    with os.fdopen(out, "wb") as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)
        writer.flush()
        if owner is not None:
            os.fchown(out, *owner)
        os.fchmod(out, 0o700 if info.st_mode & stat.S_IXUSR else 0o600)  # built libraries stay loadable
        os.utime(out, ns=(info.st_atime_ns, info.st_mtime_ns))
