"""The comparison on a GPU (compare.py, stop 72's finite fast path: sums of squares as dot
products, the worst element looked for only where elements fall outside): the same outputs
compared on the GPU and on the CPU give the same verdict, reason and count outside, and figures
equal to the last few bits, for outputs finite and not, of one chunk and of several:
`pytest -m gpu tests/gpu/test_compare_gpu.py`."""

from __future__ import annotations

import math

import pytest
import torch

from gpuarena.harness.compare import CHUNK, compare
from gpuarena.problems.model import Tolerance

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-300)


def _cases():
    generator = torch.Generator().manual_seed(3)
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1e-2, outside=1e-4)
    for n in (1000, CHUNK + 4097):
        for dtype in (torch.float32, torch.bfloat16):
            ref = torch.randn(n, generator=generator).to(dtype)
            for noise in (0.0, 1e-4, 1e-2):
                out = (ref.double() + noise * torch.randn(n, generator=generator).double()).to(dtype)
                yield out, ref, tol
                out_nan, ref_inf = out.clone(), ref.clone()
                out_nan[n // 3] = float("nan")
                ref_inf[n - 2] = float("inf")
                yield out_nan, ref, tol
                yield torch.where(ref_inf.isinf(), ref_inf, out), ref_inf, tol  # the infinity matched
                yield out, ref_inf, tol  # not matched


def test_the_gpu_s_comparison_is_the_cpu_s():
    seen = set()
    for out, ref, tol in _cases():
        on_cpu = compare("y", out, ref, tol)
        on_gpu = compare("y", out.cuda(), ref.cuda(), tol)
        quiet = compare("y", out.cuda(), ref.cuda(), tol, worst=False)
        assert (on_gpu.ok, on_gpu.status, on_gpu.reason, on_gpu.outside) == (
            on_cpu.ok,
            on_cpu.status,
            on_cpu.reason,
            on_cpu.outside,
        )
        for k in ("max_abs_error", "max_rel_error", "l2_rel_error"):
            assert _close(getattr(on_gpu, k), getattr(on_cpu, k)), (k, on_gpu, on_cpu)
        assert (quiet.ok, quiet.outside) == (on_gpu.ok, on_gpu.outside)
        assert compare("y", out.cuda(), ref.cuda(), tol, verdict_only=True).ok is on_gpu.ok
        seen.add(next((w for w in ("NaN", "outside", "differs", "L2") if w in on_cpu.reason), on_cpu.status))
    assert {"PASSED", "NaN", "outside", "differs"} <= seen
