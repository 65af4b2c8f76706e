"""Where gpuarena keeps what it may reuse between runs on this machine (builds, peaks, the
reference's ncu figures, the worker's import path). Nothing here imports the rest of the
package, so the torch-free start of a run can use it."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """GPUARENA_CACHE, else ~/.cache/gpuarena."""
    root = os.environ.get("GPUARENA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gpuarena")
    return Path(root)
