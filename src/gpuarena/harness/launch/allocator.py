"""One policy for the host allocator on both sides of a comparison: glibc's malloc returns freed
memory to the kernel as it sees fit (a threshold that moves with what the process freed
before), and memory given back is faulted in again by the next call that takes it. A fresh
worker gave back every 2 MiB softmax output it freed after a call, and its next call paid the
page faults: an honest step-by-step softmax read 2.2x slower than with the supervisor's long-
settled policy, and its frees outside the timed windows looked like work hidden from them. Both
the worker (through its environment, from its first allocation) and the supervisor (mallopt,
before it times anything) keep what they freed up to these sizes."""

from __future__ import annotations

import ctypes
import ctypes.util

MMAP_THRESHOLD = 32 << 20
"""Blocks above this come from their own mapping (glibc's largest allowed threshold)."""
TRIM_THRESHOLD = 1 << 30
"""Free memory at the top of the heap kept rather than given back, up to this."""

WORKER_ENV = {"MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD), "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD)}
"""The policy for a process started with it (glibc reads these at its first allocation)."""

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_set = False


def steady() -> bool:
    """This process's allocator on the policy (once; False where the C library is not glibc)."""
    global _set
    if _set:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    _set = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _set
