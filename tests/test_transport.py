"""The shared arena's layout of many tensors in one device allocation, and how many descriptors
a request's handles need (the GPU round trip itself: tests/gpu/test_gpu.py)."""

from __future__ import annotations

import torch

from gpuarena.harness import cuda_vmm
from gpuarena.harness.transport import fds_needed


def test_tensors_of_one_allocation_start_aligned_and_never_overlap():
    specs = [((3,), torch.float16), ((127,), torch.float32), ((0,), torch.float32), ((64, 64), torch.bfloat16)]
    offsets, end = cuda_vmm.layout(specs)
    spans = [(o, o + cuda_vmm._nbytes(shape, dtype)) for o, (shape, dtype) in zip(offsets, specs)]
    assert all(o % cuda_vmm.ALIGNMENT == 0 for o in offsets)
    for (_, a_end), (b_start, _) in zip(spans, spans[1:]):
        assert a_end <= b_start
    assert end == spans[-1][1] == offsets[-1] + 64 * 64 * 2
    assert cuda_vmm.layout([]) == ([], 0)


def test_handles_of_one_allocation_need_one_descriptor():
    one = {"kind": "cuda-fd", "fd": 0, "size": 2 << 20, "offset": 0}
    handles = [
        [{"x": dict(one), "n": 3}, {"x": dict(one, offset=512)}],
        [[dict(one, offset=1024)], [{"kind": "cpu-fd", "fd": 1}], [{"kind": "cuda-empty"}]],
    ]
    assert fds_needed(handles) == 2
    assert fds_needed([{"kind": "cuda-empty"}]) == 0
