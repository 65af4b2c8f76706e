"""The worker frozen whenever no request is in flight: it cannot run at all while it is not
being measured (the reference's block, the checks of its outputs, the wait for the next
request). A request thaws it; its reply freezes it again before the supervisor reads anything.

The cgroup's freezer where the machine gives one (v2 `cgroup.freeze`, v1 `freezer.state`):
every thread and process in the cgroup, whatever it started. Elsewhere SIGSTOP to the
worker's processes (the sandbox's namespace, or the worker's process group without one),
which a process cannot catch or block; the record says which was in force."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from gpuarena.harness.launch.cgroup import Cgroup
from gpuarena.harness.proctree import children_of, states

FREEZE_LIMIT_S = 5.0
"""How long a freeze may take to hold: a task is frozen as it leaves the kernel, and one in an
uninterruptible wait (a page fault on a network file, a GPU driver call) holds it up."""


class FreezeFailure(Exception):
    """The worker could not be frozen: it would run unmeasured, so the run cannot go on."""


class Freezer:
    """Freezes and thaws one worker; a no-op where neither a freezer nor signals can reach it."""

    def __init__(self, group: Cgroup | None, processes: Callable[[], list[int]]):
        """processes: the worker's host pids now (for the SIGSTOP fallback)."""
        self.group = group if group is not None and group.freezes else None
        self.processes = processes
        self.frozen = False
        self._stopped: list[int] = []

    @property
    def method(self) -> str:
        """How the worker is frozen, for the record."""
        if self.group is not None:
            return f"cgroup {self.group.freezes}"
        return "SIGSTOP"

    def freeze(self) -> None:
        """Freeze the worker and wait until it is: nothing of it runs after this returns."""
        if self.frozen:
            return
        self.frozen = True
        deadline = time.monotonic() + FREEZE_LIMIT_S
        if self.group is not None:
            if not self.group.set_frozen(True):
                raise FreezeFailure(f"the worker's {self.group.freezes} could not be written")
            while not self.group.is_frozen():
                if time.monotonic() > deadline:
                    raise FreezeFailure(f"the worker did not freeze within {FREEZE_LIMIT_S:.0f} s")
                time.sleep(0.0001)
            return
        self._stopped = self.processes()
        for pid in self._stopped:
            _signal(pid, signal.SIGSTOP)
        for pid in self._stopped:
            while not _stopped(pid):
                if time.monotonic() > deadline:
                    raise FreezeFailure(f"the worker's process {pid} did not stop within {FREEZE_LIMIT_S:.0f} s")
                time.sleep(0.0001)

    def thaw(self) -> None:
        """Let the worker run again (for one request)."""
        if not self.frozen:
            return
        self.frozen = False
        if self.group is not None:
            self.group.set_frozen(False)
            return
        for pid in self._stopped:
            _signal(pid, signal.SIGCONT)
        self._stopped = []


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stopped(pid: int) -> bool:
    """Whether every thread of a process is stopped (or the process is gone)."""
    found = states(f"/proc/{pid}/task")
    return found is None or all(state in ("T", "t", "Z", "X") for state in found.values())


def descendants(pid: int) -> list[int]:
    """A process and every process below it, now (host pids)."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < 4096:
        current = todo.pop()
        found.append(current)
        todo.extend(children_of(current))
    return found
