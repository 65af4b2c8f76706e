"""The comparison the supervisor makes: tolerances, NaN/Inf, small outputs, exact integers."""

from __future__ import annotations

import torch

from gpuarena.harness.compare import compare, fingerprint
from gpuarena.problems.model import DEFAULT_TOLERANCES, Tolerance

BF16 = DEFAULT_TOLERANCES["bfloat16"]


def test_close_values_pass_and_far_values_fail():
    ref = torch.randn(100, 100)
    assert compare("y", ref + 1e-6, ref, DEFAULT_TOLERANCES["float32"]).ok
    result = compare("y", ref + 1e-2, ref, DEFAULT_TOLERANCES["float32"])
    assert not result.ok and result.status == "WRONG_VALUES" and result.max_abs_error > 9e-3


def test_zeros_never_pass_even_when_outputs_are_tiny():
    ref = torch.randn(1000) * 1e-6  # everywhere far below atol
    result = compare("y", torch.zeros_like(ref), ref, DEFAULT_TOLERANCES["float32"])
    assert not result.ok and "relative L2 error" in result.reason


def test_nan_and_inf_fail_where_the_reference_is_finite():
    ref = torch.randn(10)
    for bad in (float("nan"), float("inf")):
        out = ref.clone()
        out[3] = bad
        assert not compare("y", out, ref, Tolerance(atol=1, rtol=1, l2=1)).ok


def test_integer_outputs_are_compared_exactly_whatever_the_float_tolerance():
    ids = torch.arange(64).reshape(8, 8)
    off_by_one = ids.clone()
    off_by_one[2, 5] += 1
    result = compare("topk_ids", off_by_one, ids, BF16)
    assert not result.ok and "compared exactly" in result.reason and "[2, 5]" in result.reason
    assert compare("topk_ids", ids.clone(), ids, BF16).ok


def test_shape_and_dtype_mismatches_have_their_own_status():
    ref = torch.randn(4, 4)
    assert compare("y", torch.randn(4, 5), ref, BF16).status == "WRONG_SHAPE"
    assert compare("y", ref.double(), ref, BF16).status == "WRONG_DTYPE"


def test_fingerprint_sees_a_single_changed_element_and_a_swap():
    t = torch.randn(10_000, dtype=torch.bfloat16)
    before = fingerprint(t)
    changed = t.clone()
    changed[1234] = changed[1234] * 2 + 1
    assert fingerprint(changed) != before
    swapped = t.clone()
    swapped[[10, 11]] = swapped[[11, 10]]
    assert fingerprint(swapped) != before
    assert fingerprint(t.clone()) == before
