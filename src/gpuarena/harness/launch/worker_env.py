"""The worker's environment: what it keeps of the supervisor's (nothing secret), its one-thread
settings, its allocator policy, and its home, temporary files and compile caches in its own folder."""

from __future__ import annotations

import os
from pathlib import Path

from gpuarena.harness.launch import allocator

ENV_KEPT = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_HOME",
    "CUDA_PATH",
    "LD_LIBRARY_PATH",
    "CC",
    "CXX",
    "MAX_JOBS",
    "TRITON_INTERPRET",
    "TRITON_CACHE_DIR",
    "TRITON_HOME",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_CUDA_ARCH_LIST",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
    "GPUARENA_CACHE",
    "TORCHINDUCTOR_CACHE_DIR",
)
"""Everything else (tokens, credentials, the supervisor's settings) stays out of the worker."""

CACHE_VARIABLES = {
    "GPUARENA_CACHE": "gpuarena",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TVM_FFI_CACHE_DIR": "tvm_ffi",
}


SANDBOX_CACHE_ROOT = Path("/tmp/.gpuarena-cache")
"""Where a sandboxed worker of a user of its own compiles (in its private /tmp): the same path
in every run, so that a kept torch-extension build (build_cache.py) is found up to date; its
build files name their own absolute paths."""


def scrubbed_env(
    workdir: Path | None = None, user: tuple[int, int, bool] | None = None, cache_root: Path | None = None
) -> dict[str, str]:
    """cache_root: where a worker of a per-run user compiles (default: workdir/.cache)."""
    env = {k: os.environ[k] for k in ENV_KEPT if k in os.environ}
    # inductor compiles in-process: a pool of compile workers would be a child process
    # left running, which the worker rejects
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", TORCHINDUCTOR_COMPILE_THREADS="1")
    env.update(allocator.WORKER_ENV)  # the supervisor's own policy (allocator.py)
    # no thread pools of their own in numerical libraries: a thread that appears after the
    # solution's import is the solution's (the supervisor counts the worker's threads)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    # JAX takes GPU memory as it needs it, not 75% of the GPU up front (the reference needs its share)
    env.update(XLA_PYTHON_CLIENT_PREALLOCATE="false")
    if user is not None and workdir is not None:
        # a worker of its own user has its home, temporary files (and, for a per-run user,
        # its compile caches) in its working folder: the supervisor's are not its own, and
        # nothing one run's user made (/tmp/torchinductor_$USER, say) is in another's way
        env.update(HOME=str(workdir), USER="gpuarena-worker", LOGNAME="gpuarena-worker")
        if env.get("TMPDIR") not in os.environ.get("GPUARENA_SANDBOX_SHARE", "").split(":"):
            env["TMPDIR"] = str(workdir / "tmp")  # unless the deployment shares its own with the worker
        if not user[2]:
            root = cache_root or workdir / ".cache"
            env.update({name: str(root / sub) for name, sub in CACHE_VARIABLES.items()})
    return env
