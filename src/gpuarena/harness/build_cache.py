"""A solution's compile caches, kept between its own runs and no one else's.

A worker of a user of its own (a new uid per run) compiles into its working folder (Triton's
kernels and launcher, torch extensions, gpuarena's CUDA builds: process.CACHE_VARIABLES), a
private tmpfs gone with the sandbox, so every run of a Triton solution compiled it again and
every run of an inline CUDA solution built it again (85-93 s on an H100, issue 18). The
supervisor now keeps that folder after a run, under the solution's content hash, and puts it
back before the next run of the same solution builds: a run only ever sees what earlier runs
of the very same code left, nothing of another solution's.

The supervisor reaches the folder through a directory descriptor it opens while the worker
is idle (before any solution code runs: `open_workdir`) and reads it only once every process
of the sandbox is gone, so nothing changes under it; it walks it with descriptors and never
follows a link (a worker may plant them), and keeps regular files only, up to MAX_BYTES.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from gpuarena.cache import cache_dir

MAX_BYTES = 2 << 30
"""A solution's caches above this are not kept (its next run compiles again)."""
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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
        if _size(top) > MAX_BYTES:
            return 0
        target = store(solution_hash)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        partial = Path(tempfile.mkdtemp(prefix=f"{solution_hash[:16]}-", dir=target.parent))
        try:
            count = _copy_out(top, partial)
            old = target.with_name(target.name + ".old")
            shutil.rmtree(old, ignore_errors=True)
            if target.exists():
                target.rename(old)
            partial.rename(target)
            shutil.rmtree(old, ignore_errors=True)
            return count
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    finally:
        os.close(top)


def _size(top: int) -> int:
    total = 0
    for _, _, files, folder_fd in os.fwalk(".", dir_fd=top):  # never into a link
        for name in files:
            info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def _copy_out(top: int, target: Path) -> int:
    count = 0
    for folder, _, files, folder_fd in os.fwalk(".", dir_fd=top):
        destination = target / folder
        destination.mkdir(mode=0o700, parents=True, exist_ok=True)
        for name in files:
            try:
                fd = os.open(name, _READ, dir_fd=folder_fd)
            except OSError:
                continue  # a link
            with os.fdopen(fd, "rb") as reader:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    continue  # a pipe, a device
                out_fd = os.open(destination, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    _write(reader, out_fd, name, info, None)
                finally:
                    os.close(out_fd)
                count += 1
    return count


def _folder(base_fd: int, relative: Path, owner: tuple[int, int] | None) -> int:
    """A descriptor of base/relative, each part made (0700, owned by `owner`) where missing
    and opened without following links."""
    fd = os.dup(base_fd)
    for part in relative.parts:
        try:
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
