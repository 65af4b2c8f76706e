"""A worker's CUDA context made while it imports torch (no torch here, on purpose).

A worker started ahead on a GPU imports torch (about 1.4 s on the lent H200) and only then makes
its CUDA context at `prepare` (0.21 s there, py-spy: `set_device`), and the worker ready is
the cold verdict's longest path (bench/research/cli_timeline.py). The context is the device's
primary one, which the CUDA runtime (torch, Triton) retains as well, so a thread that retains it
through libcuda from the worker's first moment makes it beside the import: ctypes lets go of the
interpreter's lock while the driver works. The thread is the harness's and is joined at
`prepare`, before the worker counts its threads and before any solution code."""

from __future__ import annotations

import ctypes
import threading

FLAG = "--context-ahead"
"""The worker's command-line switch for it, followed by the device's ordinal (harness/inside/sandbox.py)."""

_thread: threading.Thread | None = None


def _retain(ordinal: int) -> None:
    """Any failure leaves the context to `prepare`, which says what is wrong."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return
    device, context = ctypes.c_int(), ctypes.c_void_p()
    if lib.cuInit(0) != 0 or lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
        return
    lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device)  # kept: torch's is the same one


def start(ordinal: int) -> None:
    """Make the context of device `ordinal` in a thread of the harness's (once per process)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_retain, args=(ordinal,), name="gpuarena-context-ahead", daemon=True)
        _thread.start()


def join() -> None:
    """Wait for the context made ahead, if any."""
    if _thread is not None:
        _thread.join()
