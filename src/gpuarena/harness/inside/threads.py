"""The worker's own threads and output, before it replies: threads a call joined must have left
the kernel (the supervisor freezes the worker at the reply and rejects any thread left then),
tqdm's monitor thread kept from starting, C stdio flushed before a fast exit."""

from __future__ import annotations

import os
import time


def no_tqdm_monitor() -> None:
    """tqdm starts a monitor thread with its first progress bar (Inductor shows one on CUDA),
    which the worker would reject as a thread left running: turn it off, where tqdm exists."""
    try:
        import tqdm  # type: ignore[import-untyped]  # tqdm ships no stubs (types-tqdm is not installed)
    except ImportError:
        return
    tqdm.tqdm.monitor_interval = 0


def flush_c_stdio() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):
        pass


THREAD_EXIT_WAIT_S = 0.5
"""How long the worker waits, before it replies, for threads the solution joined to leave the
kernel (a joined thread has finished its Python code, but the kernel may list it a moment
longer). The supervisor freezes the worker at the reply and rejects any thread left then: the
wait is part of the request, on its clock and its CPU time."""


def tasks() -> set[str]:
    try:
        return set(os.listdir("/proc/self/task"))
    except OSError:
        return set()


def wait_for_threads(before: set[str]) -> None:
    """Until the threads that came during the request have left the kernel, or the wait is over."""
    until = time.monotonic() + THREAD_EXIT_WAIT_S
    while not tasks() <= before and time.monotonic() < until:
        time.sleep(0.0005)
