"""Tensors the supervisor owns and the worker maps: shared files on the CPU, CUDA IPC on GPUs.

The supervisor allocates every buffer the worker touches (inputs, destinations, check
slots), so nothing the worker allocates ever needs to be trusted or kept alive, and
messages from the worker can be plain JSON.

When the worker runs as a user of its own (`owner`), the shared files are given to it one by
one; their folder stays the supervisor's (the worker cannot add, remove or swap files in it).
CUDA buffers for such a worker cannot go through CUDA IPC (the driver maps those for
processes of the exporter's effective uid only: "mapping of buffer object failed"); they are
allocated with the driver's virtual memory API instead and passed as file descriptors over
the harness socket (see cuda_vmm): the handle says which of the descriptors sent with the
request is its own.
"""

from __future__ import annotations

import fcntl
import io
import os
import pickle
import shutil
import tempfile
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # registers the CUDA IPC reductions


class SharedArena:
    """Supervisor-side allocator of shared tensors; frees them all on close()."""

    def __init__(self, device: torch.device, owner: tuple[int, int] | None = None, by_fd: bool = False):
        """owner: the worker's (uid, gid), when it runs as a user of its own; by_fd: the worker
        runs in a sandbox: it cannot open the arena's files by name (a /dev/shm of its own),
        and CUDA's legacy IPC, which finds the exporter by its process id, fails from its PID
        namespace (cudaErrorMapBufferObjectFailed on an H200 with GPUARENA_WORKER_ISOLATION=0),
        so CPU tensors and device memory both go as file descriptors."""
        self.device = device
        self.owner = owner
        self.by_fd = by_fd
        self._dir = tempfile.mkdtemp(prefix="gpuarena-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        if owner is not None:
            os.chmod(self._dir, 0o711)  # the worker may open the files it is given, not list or change the folder
        self._count = 0
        self._keep: list[torch.Tensor] = []
        self._mappings: list[Any] = []
        self._fds: list[int] = []

    def empty(self, shape: torch.Size | tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, Any]:
        """A new contiguous shared tensor and the handle the worker attaches with."""
        if self.device.type == "cuda":
            if self.owner is not None or self.by_fd:
                return self._cuda_by_fd([(tuple(shape), dtype)])[0]
            tensor = torch.empty(shape, dtype=dtype, device=self.device)
            self._keep.append(tensor)
            buffer = io.BytesIO()
            ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(tensor)
            return tensor, {"kind": "cuda", "pickle": buffer.getvalue()}
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * dtype.itemsize
        if nbytes and hasattr(os, "memfd_create"):
            return self._sealed(tuple(shape), dtype, nbytes)
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
        handle = {"kind": "cpu", "path": path, "nbytes": nbytes, "dtype": str(dtype), "shape": list(shape)}
        if self.by_fd and nbytes:
            self._fds.append(os.open(path, os.O_RDWR))
            handle.update(kind="cpu-fd", fd=len(self._fds) - 1, path="")
        return tensor, handle

    def _sealed(self, shape: tuple[int, ...], dtype: torch.dtype, nbytes: int) -> tuple[torch.Tensor, Any]:
        """Host memory for the worker: a memfd whose size is sealed, sent as a descriptor. A file
        the worker could shrink (one it holds read-write, or opens by its name without a
        sandbox) left the supervisor's own mapping past its end, and the supervisor died with
        SIGBUS on its next read, without a record."""
        tensor, fd = memfd_tensor(shape, dtype)
        self._keep.append(tensor)
        self._fds.append(fd)
        handle = {"kind": "cpu-fd", "fd": len(self._fds) - 1, "path": "", "nbytes": nbytes}
        handle.update(dtype=str(dtype), shape=list(shape))
        return tensor, handle

    def empty_many(self, specs: list[tuple[tuple[int, ...], torch.dtype]]) -> list[tuple[torch.Tensor, Any]]:
        """New contiguous shared tensors of these (shape, dtype), with their handles: device
        memory for a worker of its own user or in a sandbox in one allocation (cuda_vmm.allocate
        says why), everything else as `empty` makes it."""
        if self.device.type != "cuda" or (self.owner is None and not self.by_fd):
            return [self.empty(shape, dtype) for shape, dtype in specs]
        return self._cuda_by_fd([(tuple(shape), dtype) for shape, dtype in specs])

    def _cuda_by_fd(self, specs: list[tuple[tuple[int, ...], torch.dtype]]) -> list[tuple[torch.Tensor, Any]]:
        """Device memory for a worker of another user or in a sandbox: one cuMemCreate
        allocation for all these tensors, exported as a file descriptor that goes with the next
        request (take_fds); each handle names its part (its offset)."""
        from gpuarena.harness import cuda_vmm

        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        out: list[tuple[torch.Tensor, Any]] = []
        kept = [(shape, dtype) for shape, dtype in specs if all(s != 0 for s in shape)]
        offsets, nbytes = cuda_vmm.layout(kept)
        mapping = None
        if kept:
            mapping, fd, size = cuda_vmm.allocate(self.device, nbytes)
            self._mappings.append(mapping)
            self._fds.append(fd)
        places = iter(offsets)
        for shape, dtype in specs:
            if any(s == 0 for s in shape):
                tensor = torch.empty(shape, dtype=dtype, device=self.device)
                self._keep.append(tensor)
                out.append((tensor, {"kind": "cuda-empty", "shape": list(shape), "dtype": str(dtype), "device": index}))
                continue
            assert mapping is not None  # made above, for every tensor that is not empty
            offset = next(places)
            handle = {"kind": "cuda-fd", "fd": len(self._fds) - 1, "size": size, "offset": offset}
            handle.update(shape=list(shape), dtype=str(dtype), device=index)
            out.append((mapping.view(offset, shape, dtype), handle))
        return out

    def take_fds(self) -> list[int]:
        """The descriptors of the allocations made since the last call, in the order their
        handles name them; the caller sends, then closes them."""
        fds, self._fds = self._fds, []
        return fds

    def close(self) -> None:
        self._keep.clear()
        for fd in self.take_fds():
            os.close(fd)
        if self._mappings:
            torch.cuda.synchronize(self.device)
            for mapping in self._mappings:
                mapping.close()
            self._mappings.clear()
        shutil.rmtree(self._dir, ignore_errors=True)


def memfd_tensor(shape: tuple[int, ...], dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    """A host tensor in shared memory reachable by no name (a memfd), its size sealed, and the
    memfd's descriptor (the caller sends or closes it; the mapping outlives it)."""
    numel = 1
    for n in shape:
        numel *= n
    nbytes = numel * dtype.itemsize
    fd = os.memfd_create("gpuarena-shared", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        raw = torch.from_file(f"/proc/self/fd/{fd}", shared=True, size=nbytes, dtype=torch.uint8)
    except BaseException:
        os.close(fd)
        raise
    return raw.view(dtype).view(shape), fd


_worker_mappings: list[Any] = []
"""Worker side: every cuda-fd mapping, kept until the worker exits (a solution may still hold
a tensor of an earlier workload)."""


def fds_needed(handles: Any) -> int:
    """How many descriptors come with a request whose handles these are (handles of one
    allocation name one descriptor)."""
    return len(_fd_indices(handles))


def _fd_indices(handles: Any) -> set[int]:
    if isinstance(handles, dict):
        if handles.get("kind") in ("cuda-fd", "cpu-fd"):
            return {handles["fd"]}
        return set().union(*(_fd_indices(v) for v in handles.values()))
    if isinstance(handles, (list, tuple)):
        return set().union(*(_fd_indices(v) for v in handles))
    return set()


def storage_numel(t: torch.Tensor) -> int:
    """Elements a tensor's layout spans: its numel where contiguous, else what its strides reach
    (a slice of a fused projection spans its gaps; a broadcast dimension spans one element)."""
    if t.numel() == 0 or t.is_contiguous():
        return t.numel()
    return 1 + sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def strided_layout(t: Any) -> tuple[list[int], list[int]] | None:
    """The shape and strides a shared copy of an input keeps, or None where it is contiguous (a
    plain buffer). An input a problem draws strided (a channels_last image, a transposed weight,
    a slice of a fused QKV projection) is timed on that layout: SegFormer's upsample_bilinear2d
    takes 473 µs on its recorded channels_last input and 5,118 µs on a contiguous copy (H200,
    issue 48), and the shared buffers were all contiguous."""
    if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.is_contiguous() or min(t.stride()) < 0:
        return None
    return list(t.shape), list(t.stride())


def strided(base: tuple[torch.Tensor, Any], layout: tuple[list[int], list[int]]) -> tuple[torch.Tensor, Any]:
    """A shared flat buffer (`storage_numel` elements) seen with the layout, and its handle:
    the worker attaches the buffer and takes the same view of it (`attach`)."""
    tensor, handle = base
    shape, stride = layout
    return tensor.as_strided(shape, stride), {"kind": "strided", "base": handle, "shape": shape, "stride": stride}


def attach(handle: Any, fds: list[int] | None = None, mapped: dict[int, Any] | None = None) -> torch.Tensor:
    """Worker side: map a tensor the supervisor shared (fds: the descriptors that came with
    the request, for cuda-fd handles; mapped: this request's allocations mapped so far, by
    descriptor, for the handles that share one)."""
    if handle["kind"] == "strided":  # a flat buffer seen with the input's own layout (`strided`)
        return attach(handle["base"], fds, mapped).as_strided(handle["shape"], handle["stride"])
    if handle["kind"] == "cuda":
        return pickle.loads(handle["pickle"])
    dtype = getattr(torch, handle["dtype"].removeprefix("torch."))
    if handle["kind"] == "cuda-empty":
        return torch.empty(handle["shape"], dtype=dtype, device=f"cuda:{handle['device']}")
    if handle["kind"] == "cuda-fd":
        from gpuarena.harness import cuda_vmm

        if fds is None or not 0 <= handle["fd"] < len(fds):
            raise ValueError("a cuda-fd handle without its file descriptor")
        mapping = mapped.get(handle["fd"]) if mapped is not None else None
        if mapping is None:
            device = torch.device(f"cuda:{handle['device']}")
            mapping = cuda_vmm.import_fd(device, fds[handle["fd"]], handle["size"])
            _worker_mappings.append(mapping)
            if mapped is not None:
                mapped[handle["fd"]] = mapping
        return mapping.view(handle.get("offset", 0), tuple(handle["shape"]), dtype)
    if handle["nbytes"] == 0:
        return torch.empty(handle["shape"], dtype=dtype)
    path = handle["path"]
    if handle["kind"] == "cpu-fd":  # the mapping outlives the descriptor, which the caller closes
        if fds is None or not 0 <= handle["fd"] < len(fds):
            raise ValueError("a cpu-fd handle without its file descriptor")
        path = f"/proc/self/fd/{fds[handle['fd']]}"
    raw = torch.from_file(path, shared=True, size=handle["nbytes"], dtype=torch.uint8)
    return raw.view(dtype).view(handle["shape"])
