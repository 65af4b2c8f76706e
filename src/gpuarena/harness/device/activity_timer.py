"""The harness's own CUPTI activity collector (activity_timer.cpp): `cupti-device-time` without
torch's Kineto profiler, whose start, stop and Python events cost 10-15 ms of host time per block
of 64 calls on an H200 (bench/research/kineto_session_cost.py). Built once per toolkit by the
supervisor, which holds a compiler and the CUDA toolkit; the worker gets the library's bytes with
its prepare request (a sandboxed worker may not see the cache) and loads it from a memfd."""

from __future__ import annotations

import base64
import ctypes
import os
import re
from pathlib import Path

from gpuarena.harness.device import cupti_build

SOURCE = Path(__file__).with_name("activity_timer.cpp")
HEADER = "cupti_activity.h"
LIBRARY = "libgpuarena_activity_timer.so"
RECORDS = {"KERNEL_RECORD": "Kernel", "MEMCPY_RECORD": "Memcpy", "MEMSET_RECORD": "Memset"}
"""The record structs the library reads, as the toolkit's header names them (CUpti_ActivityKernel11, ...)."""


class ActivityTimerError(RuntimeError):
    """CUPTI refused a step (its words), or dropped records: the block has no figure."""


def record_structs(cuda: Path) -> tuple[str, ...]:
    """-D macros naming the newest kernel, memcpy and memset record structs the toolkit's
    cupti_activity.h declares: their versions change with every few CUDA releases (Kernel9 in
    12.x, Kernel10 and Kernel11 in 13.x), while the fields read stay in their shared prefix."""
    text = ""
    for place in cupti_build.CUPTI_PLACES:
        header = cuda / place / "include" / HEADER
        if header.is_file():
            text = header.read_text(errors="replace")
            break
    macros = []
    for macro, kind in RECORDS.items():
        versions = [int(v) for v in re.findall(rf"\}}\s*CUpti_Activity{kind}(\d+)\s*;", text)]
        if versions:
            macros.append(f"{macro}=CUpti_Activity{kind}{max(versions)}")
    return tuple(macros)


def build_activity_timer() -> tuple[Path | None, str]:
    """The collector's shared library (built once per CUDA install and source), or None and why not."""
    return cupti_build.build(
        SOURCE, LIBRARY, "activity timer", HEADER, f"CUPTI's headers ({HEADER})", shared=True, defines=record_structs
    )


def image_text() -> str | None:
    """The library's bytes as text, for a worker's prepare request (None where it cannot be built:
    the worker then times with Kineto, as the supervisor does)."""
    library, _ = build_activity_timer()
    return base64.b64encode(library.read_bytes()).decode() if library is not None else None


class ActivityTimer:
    """One process's collector: begin(), marks from now() around each call and each harness step,
    then end() with the marks gives each call's device busy time."""

    def __init__(self, library: Path | None = None, image: bytes | None = None):
        if image is not None:  # the worker: from memory, not from a path it may not see
            # the descriptor stays open: the loader knows a library by its path, and a number
            # used again would name another image as one already loaded
            self._fd = os.memfd_create("gpuarena-activity-timer", os.MFD_CLOEXEC)
            os.write(self._fd, image)
            self.lib = ctypes.CDLL(f"/proc/self/fd/{self._fd}")
        else:
            if library is None:
                library, why = build_activity_timer()
                if library is None:
                    raise ActivityTimerError(why)
            self.lib = ctypes.CDLL(str(library))
        self.lib.gat_now.restype = ctypes.c_uint64
        self.lib.gat_error.restype = ctypes.c_char_p
        self.lib.gat_end.restype = ctypes.c_longlong
        self.lib.gat_end.argtypes = [
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_longlong),
        ]
        self.now = self.lib.gat_now
        """CUPTI's clock, the activity records' own (a bound C function: a mark costs about a µs)."""

    def _error(self) -> ActivityTimerError:
        return ActivityTimerError((self.lib.gat_error() or b"").decode(errors="replace") or "CUPTI failed")

    def begin(self) -> None:
        if self.lib.gat_begin() != 0:
            raise self._error()

    def end(self, calls: list[int], harness: list[int]) -> tuple[list[int], int]:
        """Each call's busy time (calls: start and end marks of each call, in order; harness: those of
        the harness's own steps), and how many device records of the harness's own steps the block
        saw (its sweeps: a caller that launched them checks they were seen)."""
        n, m = len(calls) // 2, len(harness) // 2
        out = (ctypes.c_uint64 * max(n, 1))()
        own = ctypes.c_longlong(0)
        seen = self.lib.gat_end((ctypes.c_uint64 * max(len(calls), 1))(*calls), n,
                                (ctypes.c_uint64 * max(len(harness), 1))(*harness), m, out, ctypes.byref(own))  # fmt: skip
        if seen < 0:
            raise self._error()
        return list(out[:n]), own.value


_loaded: dict[str, ActivityTimer | None] = {}
_why: dict[str, str] = {}
"""This process's collector (or None, and why) once load() ran."""


def load(image: bytes | None = None) -> ActivityTimer | None:
    """This process's collector (the worker's from `image`, the supervisor's from the cache), made
    once; None where it cannot load (no toolkit, no compiler: Kineto times instead), see why()."""
    if "timer" not in _loaded:
        try:
            _loaded["timer"] = ActivityTimer(image=image)
        except (OSError, ActivityTimerError) as exc:
            _loaded["timer"], _why["timer"] = None, str(exc)[:300]
    return _loaded["timer"]


def loaded() -> ActivityTimer | None:
    """The collector if load() made one (nothing is built or loaded here)."""
    return _loaded.get("timer")


def unload(why: str) -> None:
    """The collector failed its probe: Kineto times in this process from now on."""
    _loaded["timer"], _why["timer"] = None, why[:300]


def why() -> str:
    return _why.get("timer", "")
