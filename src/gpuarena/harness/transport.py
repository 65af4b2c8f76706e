"""Tensors the supervisor owns and the worker maps: shared files on the CPU, CUDA IPC on GPUs.

The supervisor allocates every buffer the worker touches (inputs, destinations, check
slots), so nothing the worker allocates ever needs to be trusted or kept alive, and
messages from the worker can be plain JSON.

When the worker runs as a user of its own (`owner`), the shared files are given to it one by
one; their folder stays the supervisor's (the worker cannot add, remove or swap files in it).
"""

from __future__ import annotations

import inspect
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

    def __init__(self, device: torch.device, owner: tuple[int, int] | None = None):
        self.device = device
        self.owner = owner
        self._dir = tempfile.mkdtemp(prefix="gpuarena-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        if owner is not None:
            os.chmod(self._dir, 0o711)  # the worker may open the files it is given, not list or change the folder
        self._count = 0
        self._keep: list[torch.Tensor] = []

    def empty(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, Any]:
        """A new contiguous shared tensor and the handle the worker attaches with."""
        if self.device.type == "cuda":
            tensor = torch.empty(shape, dtype=dtype, device=self.device)
            self._keep.append(tensor)
            if self.owner is not None:
                return tensor, {"kind": "cuda-rebuild", "pickle": self._cuda_for_owner(tensor)}
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
            if self.owner is not None:
                os.chown(path, *self.owner)
                os.chmod(path, 0o600)
        self._keep.append(tensor)
        return tensor, {"kind": "cpu", "path": path, "nbytes": nbytes, "dtype": str(dtype), "shape": list(shape)}

    def _cuda_for_owner(self, tensor: torch.Tensor) -> bytes:
        """CUDA IPC for a worker of another user. PyTorch's IPC also maps a reference-count
        file in /dev/shm that its creator (this process) made 0600; the worker must open it
        read-write, so it goes to the workers' group (0660). It holds only reference counts:
        the arena keeps every tensor alive until close(), whatever they say.
        (Not yet run on a GPU machine.)"""
        from torch.multiprocessing.reductions import reduce_tensor

        rebuild, args = reduce_tensor(tensor)
        names = list(inspect.signature(rebuild).parameters)
        if "ref_counter_handle" in names:
            handle = args[names.index("ref_counter_handle")]
            path = os.path.join("/dev/shm", bytes(handle).decode().lstrip("/"))
            if os.path.exists(path):
                os.chown(path, -1, self.owner[1])
                os.chmod(path, 0o660)
        return pickle.dumps((rebuild, args), protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        self._keep.clear()
        shutil.rmtree(self._dir, ignore_errors=True)


def attach(handle: Any) -> torch.Tensor:
    """Worker side: map a tensor the supervisor shared."""
    if handle["kind"] == "cuda":
        return pickle.loads(handle["pickle"])
    if handle["kind"] == "cuda-rebuild":
        rebuild, args = pickle.loads(handle["pickle"])
        return rebuild(*args)
    dtype = getattr(torch, handle["dtype"].removeprefix("torch."))
    if handle["nbytes"] == 0:
        return torch.empty(handle["shape"], dtype=dtype)
    raw = torch.from_file(handle["path"], shared=True, size=handle["nbytes"], dtype=torch.uint8)
    return raw.view(dtype).view(handle["shape"])
