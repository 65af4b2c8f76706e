"""CUDA device memory shared through a file descriptor (the driver's virtual memory
management API: cuMemCreate with POSIX file-descriptor handles), through ctypes on libcuda.

Used between the supervisor and a worker that runs as another user: CUDA's legacy IPC
(cudaIpcOpenMemHandle, what PyTorch's CUDA tensor pickling uses) duplicates the exporter's
driver objects, which the driver allows only between processes of one effective uid. A
memory handle exported as a file descriptor is a capability instead: whoever holds the
descriptor (passed over the harness socket with SCM_RIGHTS) can import and map it.

Both sides must already have a current CUDA context (PyTorch's primary context, made
current by any CUDA operation on the device).
"""

from __future__ import annotations

import ctypes
import os

import torch

CU_MEM_ALLOCATION_TYPE_PINNED = 1
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1
CU_MEM_LOCATION_TYPE_DEVICE = 1
CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


class CudaError(RuntimeError):
    pass


_lib: ctypes.CDLL | None = None


def _cuda() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        u64, size_t, vp = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
        sigs = {
            "cuInit": [ctypes.c_uint],
            "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size_t), ctypes.POINTER(_AllocationProp), ctypes.c_int],
            "cuMemCreate": [ctypes.POINTER(u64), size_t, ctypes.POINTER(_AllocationProp), u64],
            "cuMemExportToShareableHandle": [vp, u64, ctypes.c_int, u64],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), vp, ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size_t, size_t, u64, u64],
            "cuMemMap": [u64, size_t, size_t, u64, u64],
            "cuMemSetAccess": [u64, size_t, ctypes.POINTER(_AccessDesc), size_t],
            "cuMemUnmap": [u64, size_t],
            "cuMemAddressFree": [u64, size_t],
            "cuMemRelease": [u64],
        }
        for name, args in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, ctypes.c_int
        _lib = lib
    return _lib


def _check(status: int, what: str) -> None:
    if status != 0:
        text = ctypes.c_char_p()
        _cuda().cuGetErrorString(status, ctypes.byref(text))
        raise CudaError(f"{what} failed: CUDA error {status} ({(text.value or b'?').decode()})")


def _prop(device: int) -> _AllocationProp:
    prop = _AllocationProp()
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    prop.location = _Location(CU_MEM_LOCATION_TYPE_DEVICE, device)
    return prop


def _ensure_context(device: torch.device) -> int:
    index = device.index if device.index is not None else torch.cuda.current_device()
    torch.cuda.set_device(index)
    torch.cuda.init()
    torch.empty(1, device=f"cuda:{index}")  # makes the primary context current on this thread
    return index


def granularity(device: int) -> int:
    g = ctypes.c_size_t()
    prop = _prop(device)
    _check(
        _cuda().cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), CU_MEM_ALLOC_GRANULARITY_MINIMUM),
        "cuMemGetAllocationGranularity",
    )
    return g.value


class _ArrayInterface:
    """What torch.as_tensor reads to wrap device memory it does not own (as bytes)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 2,
            "strides": None,
        }


def _wrap(ptr: int, shape: tuple[int, ...], dtype: torch.dtype, index: int) -> torch.Tensor:
    raw = torch.as_tensor(_ArrayInterface(ptr, _nbytes(shape, dtype)), device=f"cuda:{index}")
    return raw.view(dtype).view(shape)


class Mapping:
    """One allocation mapped into this process's address space; `view` gives tensors over
    parts of it (valid until close())."""

    def __init__(self, handle: int, size: int, index: int):
        lib = _cuda()
        self.handle, self.size, self.index, self.ptr = handle, size, index, 0
        ptr = ctypes.c_ulonglong()
        _check(lib.cuMemAddressReserve(ctypes.byref(ptr), size, 0, 0, 0), "cuMemAddressReserve")
        self.ptr = ptr.value
        try:
            _check(lib.cuMemMap(self.ptr, size, 0, handle, 0), "cuMemMap")
            access = _AccessDesc(_Location(CU_MEM_LOCATION_TYPE_DEVICE, index), CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            _check(lib.cuMemSetAccess(self.ptr, size, ctypes.byref(access), 1), "cuMemSetAccess")
        except CudaError:
            self.close()
            raise

    def view(self, offset: int, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """A tensor over bytes [offset, offset + its size) of the allocation: a storage of its
        own (torch sees separate buffers, as it did with one allocation each)."""
        if offset < 0 or offset % ALIGNMENT or offset + _nbytes(shape, dtype) > self.size:
            raise ValueError(f"a view of {_nbytes(shape, dtype)} bytes at {offset} of an allocation of {self.size}")
        return _wrap(self.ptr + offset, shape, dtype, self.index)

    def close(self) -> None:
        lib = _cuda()
        if self.ptr:
            lib.cuMemUnmap(self.ptr, self.size)
            lib.cuMemAddressFree(self.ptr, self.size)
            self.ptr = 0
        if self.handle:
            lib.cuMemRelease(self.handle)
            self.handle = 0


ALIGNMENT = 512
"""Where each tensor of one allocation starts (a multiple of): torch's own allocator's."""


def _nbytes(shape: tuple[int, ...], dtype: torch.dtype) -> int:
    n = 1
    for s in shape:
        n *= s
    return n * dtype.itemsize


def layout(specs: list[tuple[tuple[int, ...], torch.dtype]]) -> tuple[list[int], int]:
    """Offsets of tensors of these (shape, dtype) placed one after another in one allocation,
    each at a multiple of ALIGNMENT, and the bytes they span."""
    offsets, end = [], 0
    for shape, dtype in specs:
        start = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(start)
        end = start + _nbytes(shape, dtype)
    return offsets, end


def allocate(device: torch.device, nbytes: int) -> tuple[Mapping, int, int]:
    """A new allocation of at least nbytes mapped here: (mapping, exported file descriptor,
    size in bytes). The caller closes the descriptor once it has been passed on.

    One allocation serves many tensors (`layout`, `Mapping.view`): each costs about 0.8 ms to
    create and export and 0.6 ms to release whatever its size (H200,
    bench/research/vmm_cost.py), and a workload of 64 input sets has hundreds of tensors."""
    index = _ensure_context(device)
    g = granularity(index)
    size = max(g, -(-nbytes // g) * g)
    lib = _cuda()
    handle = ctypes.c_ulonglong()
    prop = _prop(index)
    _check(lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop), 0), "cuMemCreate")
    try:
        fd = ctypes.c_int(-1)
        _check(
            lib.cuMemExportToShareableHandle(
                ctypes.byref(fd), handle.value, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0
            ),
            "cuMemExportToShareableHandle",
        )
    except CudaError:
        lib.cuMemRelease(handle.value)
        raise
    try:
        return Mapping(handle.value, size, index), fd.value, size
    except CudaError:
        os.close(fd.value)
        raise


def import_fd(device: torch.device, fd: int, size: int) -> Mapping:
    """Worker side: map an allocation exported by allocate() (fd received over the socket)."""
    index = _ensure_context(device)
    handle = ctypes.c_ulonglong()
    _check(
        _cuda().cuMemImportFromShareableHandle(
            ctypes.byref(handle), ctypes.c_void_p(fd), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        ),
        "cuMemImportFromShareableHandle",
    )
    return Mapping(handle.value, size, index)
