"""Triton's cache key computed in a worker before it imports torch (no torch here, on purpose).

A Triton kernel's first launch in a process, cached on disk or not, computes Triton's cache key:
a hash of Triton's own files and of its 500 MB library (0.9 s on the 2-core VM; on an H100 most
of the 0.5 s a Triton run's worker spent in its first call), and ptxas's version, for the backend's
hash (`ptxas_versions`). The worker's interpreter and torch
take seconds to import, and that is the run's longest path (bench/research/cli_timeline.py), so a
worker started ahead on a GPU computes the key in a thread from its first moment: hashing and
reading let the import go on. The thread is the harness's and is over before the solution is
imported (the worker's build joins it); Triton's own `lru_cache` keeps the key for the launch.
"""

from __future__ import annotations

import ctypes
import inspect
import threading

FLAG = "--warm-triton"
"""The worker's command-line switch for it (harness/inside/sandbox.py)."""

_thread: threading.Thread | None = None
_utils: threading.Thread | None = None


def _compile_utils() -> None:
    """Triton's CUDA driver utilities compiled into the worker's cache (a C compile of 0.3-0.5 s,
    `build_driver`), beside the key and the worker's imports rather than after them: in a cold
    run the supervisor waited for it (py-spy, H200). Only Triton's own module, no torch and no
    device: the active driver, made later, finds the compiled module in the cache. Started once
    Triton is imported: two threads importing it at once deadlock on its module locks (both
    imports then fail, the key's too)."""
    try:
        from triton.backends.nvidia.driver import CudaUtils
    except Exception:  # no Triton, or not NVIDIA's: nothing to compile ahead
        return
    try:
        CudaUtils()
    except Exception:  # left for the active driver to meet
        pass


CAPABILITY_MAJOR, CAPABILITY_MINOR = 75, 76
"""libcuda's CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR and _MINOR."""


def device_archs() -> list[int]:
    """The compute capabilities (major * 10 + minor, Triton's `target.arch`) of the visible CUDA
    devices, read through libcuda: no torch, no context. Empty where there is no driver."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return []
    count = ctypes.c_int()
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return []
    archs = set()
    for ordinal in range(count.value):
        device, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(device), ordinal) != 0:
            continue
        if (
            lib.cuDeviceGetAttribute(ctypes.byref(major), CAPABILITY_MAJOR, device) == 0
            and lib.cuDeviceGetAttribute(ctypes.byref(minor), CAPABILITY_MINOR, device) == 0
        ):
            archs.add(major.value * 10 + minor.value)
    return sorted(archs)


def ptxas_versions(archs: list[int]) -> None:
    """ptxas's version for each arch, into Triton's own `lru_cache`. A Triton kernel's first
    compile in a process, found in the disk cache or not, hashes the backend with it: two runs of
    `ptxas --version` (the tool's check, then the version), 0.23 s of a cold verdict's first call on
    an H200 (py-spy: `CUDABackend.hash`). Called as the backend calls it (the arch positional: the
    cache keys on how it is called); a Triton whose function takes no arch gets one call."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version
    except Exception:  # no Triton, or no NVIDIA backend in it
        return
    try:
        takes_arch = bool(inspect.signature(get_ptxas_version).parameters)
    except (TypeError, ValueError):
        return
    for arch in archs if takes_arch else [None]:
        try:
            get_ptxas_version(arch) if arch is not None else get_ptxas_version()
        except Exception:  # left for the solution's own launch to meet
            pass


def _compute() -> None:
    global _utils
    try:
        from triton.runtime.cache import triton_key
    except Exception:  # no Triton, or one that keeps it elsewhere: nothing to warm
        return
    _utils = threading.Thread(target=_compile_utils, name="gpuarena-triton-utils", daemon=True)
    _utils.start()
    try:
        triton_key()
    except Exception:  # left for the solution's own launch to meet
        pass
    ptxas_versions(device_archs())


def start() -> None:
    """Compute the key in a thread of the harness's (once per process)."""
    global _thread
    if _thread is None:
        _thread = threading.Thread(target=_compute, name="gpuarena-triton-key", daemon=True)
        _thread.start()


def join() -> None:
    """Wait for them: before any solution code runs (the key's thread starts the other one)."""
    if _thread is not None:
        _thread.join()
    if _utils is not None:
        _utils.join()


def build_driver() -> None:
    """Triton's driver utilities made ahead, where the key was. Triton compiles them with the
    host's C compiler at its first launch in a process, into the worker's own cache folder:
    0.3-0.5 s of a warm verdict's correctness phase on an H200 (bench/research/sampled_stacks.py),
    paid while the verdict waited. Made once the worker's torch is loaded and before any
    solution code, the compile runs while an earlier job is timed, and the solution's first
    launch finds them."""
    if _thread is None:
        return
    join()
    try:
        from triton.runtime import driver

        driver.active.utils  # noqa: B018  (creating the active driver compiles and loads them)
    except Exception:  # no CUDA Triton here: the solution's own launch meets whatever this met
        pass
