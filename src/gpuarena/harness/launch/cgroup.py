"""The worker's cgroup, where this machine lets the supervisor make one (v2, or v1's memory,
pids, cpuacct, freezer and cpuset hierarchies): a memory limit that counts every kind of memory
(shared anonymous, tmpfs files), a process limit, the CPU time of everything in it, read from
outside the worker, the freezer that stops all of it between requests (freeze.py), and the
cores it may run on. containment.py says what else contains a worker."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROCESS_LIMIT = 512
"""Processes and threads the worker's cgroup may hold at once (a fork bomb stops there)."""
V1_ROLES = ("memory", "pids", "cpuacct", "freezer", "cpuset")
"""The v1 hierarchies the worker gets a folder in, where they are mounted and writable."""


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
    """Role ('v2', or a v1 hierarchy of V1_ROLES) -> the folder made for this worker."""
    limits: list[str] = field(default_factory=list)
    cores: frozenset[int] = frozenset()
    """The cores the worker is pinned to by a cpuset (empty: not pinned, its affinity only)."""

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
                roles = [r for r in V1_ROLES if r in options.split(",")]
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
        self._pin()

    def _pin(self) -> None:
        """The worker's cores: this process's own (a runner's slot, a taskset), as a cpuset the
        worker cannot widen from inside, as it could its affinity. A v1 cpuset takes no task
        before its cores and memory nodes are set; a v1 folder that cannot be set is dropped."""
        try:
            cores = frozenset(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return
        listed = ",".join(str(c) for c in sorted(cores))
        if self._write("v2", "cpuset.cpus", listed):
            self.cores = cores
        elif "cpuset" in self.folders:
            folder = self.folders["cpuset"]
            try:
                mems = (folder.parent / "cpuset.mems").read_text().strip()
            except OSError:
                mems = ""
            if mems and self._write("cpuset", "cpuset.mems", mems) and self._write("cpuset", "cpuset.cpus", listed):
                self.cores = cores
            else:
                self._drop("cpuset")
        if self.cores:
            self.limits.append(f"cpuset {listed}")

    def _drop(self, role: str) -> None:
        folder = self.folders.pop(role)
        if folder not in self.folders.values():
            try:
                folder.rmdir()
            except OSError:
                pass

    @property
    def freezes(self) -> str | None:
        """How this cgroup freezes its processes ('cgroup.freeze' on v2, 'freezer.state' on v1),
        or None where it cannot."""
        for role, name in (("v2", "cgroup.freeze"), ("freezer", "freezer.state")):
            folder = self.folders.get(role)
            if folder is not None and (folder / name).exists():
                return name
        return None

    def set_frozen(self, frozen: bool) -> bool:
        """Ask the kernel to freeze (or thaw) everything in the cgroup; False where it cannot."""
        if self.freezes == "cgroup.freeze":
            return self._write("v2", "cgroup.freeze", "1" if frozen else "0")
        if self.freezes == "freezer.state":
            return self._write("freezer", "freezer.state", "FROZEN" if frozen else "THAWED")
        return False

    def is_frozen(self) -> bool:
        """Whether every process of the cgroup is frozen now (a freeze takes effect shortly after
        it is asked for: a task in a system call is frozen as it leaves it)."""
        try:
            if self.freezes == "cgroup.freeze":
                return "frozen 1" in (self.folders["v2"] / "cgroup.events").read_text().splitlines()
            if self.freezes == "freezer.state":
                return (self.folders["freezer"] / "freezer.state").read_text().strip() == "FROZEN"
        except OSError:
            pass
        return False

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

    def remove(self) -> None:
        """Kill whatever is still inside (thawed first: a v1 frozen task takes no signal), then
        remove the folders."""
        self.set_frozen(False)
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
