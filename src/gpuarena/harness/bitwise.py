"""Whether two tensors hold the same bits, without a copy of either and with a bounded temporary.

The supervisor checks after every timed request of the solution that no input changed, bit for
bit, against its private copy. Comparing the bytes of contiguous copies made two copies of every
input that is not contiguous, temporaries no memory plan counts: DeepSeek-V3's MoE layer keeps
its experts' weights in their recorded, transposed strides, 14 GiB each on an H200. And on a GPU
torch.equal is `eq(a, b).all()`, a temporary of a byte per element. So each tensor is viewed as
integers of its element's size (a view of any strides, no copy) and compared a chunk at a time."""

from __future__ import annotations

import torch

CHUNK_ELEMENTS = 1 << 26
"""Elements compared at once: a 64 MiB temporary of torch.equal's on a GPU, about 0.1 ms there."""
QUEUED_COMPARISON_BYTES = 16 << 20
"""Inputs up to this size are compared on the device without waiting (`differs`: a temporary of
their size in elements each); larger ones with `equal`, a wait for each chunk (they are few)."""

_INTEGER = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bits(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor's bits as integers of its element's size, same shape and strides (a view; a
    complex one gains a last dimension of two, a 0-dim one becomes 1-dim); None for an element size
    no integer has."""
    if t.is_complex():
        t = torch.view_as_real(t)
    integer = _INTEGER.get(t.element_size())
    if integer is None:
        return None
    return (t.reshape(1) if t.dim() == 0 else t).view(integer)


def _as_bytes(t: torch.Tensor) -> torch.Tensor:
    """Any tensor as bytes (a contiguous copy where it is not contiguous): for what `bits` cannot view."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def _equal_chunks(a: torch.Tensor, b: torch.Tensor) -> bool:
    """torch.equal of two integer views of one shape, at most CHUNK_ELEMENTS at a time, along the
    outermost dimensions."""
    if a.numel() <= CHUNK_ELEMENTS:
        return torch.equal(a, b)
    if a.dim() == 1:
        return all(
            torch.equal(a[i : i + CHUNK_ELEMENTS], b[i : i + CHUNK_ELEMENTS])
            for i in range(0, a.shape[0], CHUNK_ELEMENTS)
        )
    inner = a[0].numel()
    if inner > CHUNK_ELEMENTS:  # one slice alone is too large: each is compared a level down
        return all(_equal_chunks(a[i], b[i]) for i in range(a.shape[0]))
    step = CHUNK_ELEMENTS // inner
    return all(torch.equal(a[i : i + step], b[i : i + step]) for i in range(0, a.shape[0], step))


def equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a and b hold the same bits (a NaN equals its own bits; -0.0 is not 0.0)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.numel() == 0:
        return True
    x, y = bits(a), bits(b)
    if x is None or y is None:
        return torch.equal(_as_bytes(a), _as_bytes(b))
    return _equal_chunks(x, y)


def differs(a: torch.Tensor, b: torch.Tensor) -> bool | torch.Tensor:
    """Whether two tensors differ in any bit (or in shape or dtype): for small ones a 0-dim bool
    tensor on their device, not yet waited for."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return True
    if a.numel() * a.element_size() > QUEUED_COMPARISON_BYTES:
        return not equal(a, b)
    if a.numel() == 0:
        return False
    x, y = bits(a), bits(b)
    if x is None or y is None:
        return torch.ne(_as_bytes(a), _as_bytes(b)).any()
    return torch.ne(x, y).any()
