"""Tensors the supervisor owns and the worker maps: shared files on the CPU, CUDA IPC on GPUs.

The supervisor allocates every buffer the worker touches (inputs, destinations, check
slots), so nothing the worker allocates ever needs to be trusted or kept alive, and
messages from the worker can be plain JSON.
"""

from __future__ import annotations

import io
import os
import pickle
import shutil
import tempfile
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401  (registers the CUDA IPC reductions)
from multiprocessing.reduction import ForkingPickler


class SharedArena:
    """Supervisor-side allocator of shared tensors; frees them all on close()."""

    def __init__(self, device: torch.device):
        self.device = device
        self._dir = tempfile.mkdtemp(prefix="gpuarena-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        self._count = 0
        self._keep: list[torch.Tensor] = []

    def empty(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, Any]:
        """A new contiguous shared tensor and the handle the worker attaches with."""
        if self.device.type == "cuda":
            tensor = torch.empty(shape, dtype=dtype, device=self.device)
            self._keep.append(tensor)
            buffer = io.BytesIO()
            ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(tensor)
            return tensor, {"kind": "cuda", "pickle": buffer.getvalue()}
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * dtype.itemsize
        self._count += 1
        path = os.path.join(self._dir, f"t{self._count}")
        if nbytes == 0:
            tensor = torch.empty(shape, dtype=dtype)
        else:
            tensor = torch.from_file(path, shared=True, size=nbytes, dtype=torch.uint8).view(dtype).view(shape)
        self._keep.append(tensor)
        return tensor, {"kind": "cpu", "path": path, "nbytes": nbytes, "dtype": str(dtype), "shape": list(shape)}

    def close(self) -> None:
        self._keep.clear()
        shutil.rmtree(self._dir, ignore_errors=True)


def attach(handle: Any) -> torch.Tensor:
    """Worker side: map a tensor the supervisor shared."""
    if handle["kind"] == "cuda":
        return pickle.loads(handle["pickle"])
    dtype = getattr(torch, handle["dtype"].removeprefix("torch."))
    if handle["nbytes"] == 0:
        return torch.empty(handle["shape"], dtype=dtype)
    raw = torch.from_file(handle["path"], shared=True, size=handle["nbytes"], dtype=torch.uint8)
    return raw.view(dtype).view(handle["shape"])
