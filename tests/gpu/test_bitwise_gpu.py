"""The bitwise input check on a GPU (harness/bitwise.py), where torch.equal is `eq().all()`."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness import bitwise


@pytest.mark.gpu
def test_on_a_gpu_a_transposed_input_is_compared_in_place_in_chunks():
    """On CUDA, where torch.equal is `eq().all()`: a transposed 256 MiB input compared with no
    more than a chunk's temporary (the allocator's peak over the comparison), one bit found."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    a = torch.randn(8192, 8192, device="cuda").t()
    b = a.contiguous()  # a copy in another layout
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    held = torch.cuda.memory_allocated()
    assert bitwise.equal(a, b)
    peak = torch.cuda.max_memory_allocated() - held
    assert peak <= 2 * bitwise.CHUNK_ELEMENTS, f"{peak / 2**20:.0f} MiB of temporaries"
    b[-1, -1] = torch.nextafter(b[-1, -1], torch.tensor(float("inf"), device="cuda"))
    assert not bitwise.equal(a, b)
