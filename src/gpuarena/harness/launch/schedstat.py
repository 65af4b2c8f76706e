"""A thread's time on a core and time waiting for one, from the kernel (`schedstat`, in ns):
what the supervisor reads around each request, from outside the worker, to tell the worker's
own work from another process's load (bounds.TimeBudget)."""

from __future__ import annotations


def _read(path: str) -> tuple[int, int] | None:
    try:
        with open(path) as f:
            ran, waited = f.read().split()[:2]
        return int(ran), int(waited)
    except (OSError, ValueError):
        return None


def main_thread(pid: int) -> tuple[int, int] | None:
    """(time on a core, time waiting for one) of a process's main thread; None where the
    kernel does not keep them."""
    return _read(f"/proc/{pid}/schedstat")


def this_thread() -> tuple[int, int] | None:
    """The same for the calling thread."""
    return _read("/proc/thread-self/schedstat")
