"""The worker's cgroup, where this machine lets the supervisor make one (v2, or v1's memory,
pids and cpuacct hierarchies): a memory limit that counts every kind of memory (shared
anonymous, tmpfs files), a process limit, and the CPU time of everything in it, read from
outside the worker. containment.py says what else contains a worker."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROCESS_LIMIT = 512
"""Processes and threads the worker's cgroup may hold at once (a fork bomb stops there)."""


def _own_cgroups() -> dict[str, str]:
    """controller list (v1: 'memory', 'pids,...'; v2: '') -> this process's cgroup path."""
    found: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                found[controllers] = path
    except (OSError, ValueError):
        pass
    return found


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of the cgroup file systems."""
    mounts = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, right = line.split(" - ", 1)
                fstype, _, options = right.split()[:3]
                if fstype in ("cgroup", "cgroup2"):
                    mounts.append((left.split()[4], fstype, options))
    except (OSError, ValueError):
        pass
    return mounts


@dataclass
class Cgroup:
    """The worker's cgroup(s): made before it starts, removed (everything in it killed) after."""

    folders: dict[str, Path] = field(default_factory=dict)
    """Role ('v2', 'memory', 'pids', 'cpuacct') -> the folder made for this worker."""
    limits: list[str] = field(default_factory=list)

    @classmethod
    def make(cls, name: str, memory_bytes: int | None) -> Cgroup:
        """The cgroup(s) this machine lets us make, limited; none with GPUARENA_SANDBOX_CGROUP=0."""
        group = cls()
        if os.environ.get("GPUARENA_SANDBOX_CGROUP", "1").strip().lower() in ("0", "false", "no", "off"):
            return group
        own = _own_cgroups()
        for mount, fstype, options in _mounts():
            if fstype == "cgroup2":
                roles, path = ["v2"], own.get("")
            else:
                roles = [r for r in ("memory", "pids", "cpuacct") if r in options.split(",")]
                key = next((k for k in own if roles and roles[0] in k.split(",")), None)
                path = own.get(key) if key else None
            if not roles or path is None or any(r in group.folders for r in roles):
                continue
            folder = Path(mount) / path.lstrip("/") / name
            try:
                folder.mkdir()
            except OSError:
                continue
            for role in roles:
                group.folders.setdefault(role, folder)
        group._limit(memory_bytes)
        return group

    def _write(self, role: str, name: str, value: str) -> bool:
        folder = self.folders.get(role)
        if folder is None or not (folder / name).exists():
            return False
        try:
            (folder / name).write_text(value)
            return True
        except OSError:
            return False

    def _limit(self, memory_bytes: int | None) -> None:
        if memory_bytes:
            if self._write("v2", "memory.max", str(memory_bytes)):
                self._write("v2", "memory.swap.max", "0")
                self.limits.append(f"memory.max {memory_bytes >> 20} MiB")
            elif self._write("memory", "memory.limit_in_bytes", str(memory_bytes)):
                self._write("memory", "memory.memsw.limit_in_bytes", str(memory_bytes))
                self.limits.append(f"memory.limit_in_bytes {memory_bytes >> 20} MiB")
        if self._write("v2", "pids.max", str(PROCESS_LIMIT)) or self._write("pids", "pids.max", str(PROCESS_LIMIT)):
            self.limits.append(f"pids.max {PROCESS_LIMIT}")

    @property
    def counts_memory(self) -> bool:
        return any(limit.startswith("memory") for limit in self.limits)

    def enter(self) -> None:
        """Put the calling process in every folder (run in the child before it execs)."""
        for folder in set(self.folders.values()):
            try:
                (folder / "cgroup.procs").write_text(str(os.getpid()))
            except OSError:
                pass

    def cpu_ns(self) -> int | None:
        """CPU time of everything that ever ran in the cgroup (the kernel's account)."""
        folder = self.folders.get("cpuacct")
        if folder is not None:
            try:
                return int((folder / "cpuacct.usage").read_text())
            except (OSError, ValueError):
                pass
        folder = self.folders.get("v2")
        if folder is not None:
            try:
                for line in (folder / "cpu.stat").read_text().splitlines():
                    key, value = line.split()
                    if key == "usage_usec":
                        return int(value) * 1000
            except (OSError, ValueError):
                pass
        return None

    def memory_peak_exceeded(self) -> bool:
        """Whether the memory limit was hit (the kernel refused or reclaimed for it)."""
        for role, name, key in (("v2", "memory.events", "max"), ("memory", "memory.failcnt", None)):
            folder = self.folders.get(role)
            if folder is None:
                continue
            try:
                text = (folder / name).read_text()
            except OSError:
                continue
            if key is None:
                return int(text.strip() or 0) > 0
            for line in text.splitlines():
                k, v = line.split()
                if k in ("oom", "oom_kill") and int(v) > 0:
                    return True
        return False

    def remove(self) -> None:
        """Kill whatever is still inside, then remove the folders."""
        for folder in set(self.folders.values()):
            if (folder / "cgroup.kill").exists():
                try:
                    (folder / "cgroup.kill").write_text("1")
                except OSError:
                    pass
            for _ in range(50):
                try:
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    try:
                        os.kill(pid, 9)
                    except OSError:
                        pass
                try:
                    folder.rmdir()
                    break
                except OSError:
                    time.sleep(0.02)


# -- the namespace, from outside -----------------------------------------------------------
