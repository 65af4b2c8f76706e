"""The comparison the supervisor makes: tolerances, NaN/Inf, small outputs, exact integers."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness import compare as compare_module
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


def test_the_figures_and_the_worst_element_are_the_ones_computed_by_hand():
    ref = torch.arange(1.0, 17.0).reshape(4, 4)
    out = ref.clone()
    out[2, 3] += 0.5
    out[0, 1] += 1e-3
    tol = Tolerance(atol=1e-2, rtol=1e-2, l2=1.0)
    result = compare("y", out, ref, tol)
    assert not result.ok and result.status == "WRONG_VALUES"
    assert "1 of 16 elements outside atol=0.01, rtol=0.01; worst at [2, 3]: got 12.5, expected 12" in result.reason
    diff = (out.double() - ref.double()).abs()
    assert result.max_abs_error == float(diff.max())
    assert result.max_rel_error == float((diff / ref.double().abs()).max())
    assert abs(result.l2_rel_error - float(diff.norm() / ref.double().norm())) < 1e-15
    passed = compare("y", out, ref, Tolerance(atol=1.0, rtol=0.0, l2=1.0))
    assert passed.ok and passed.max_abs_error == result.max_abs_error and passed.l2_rel_error == result.l2_rel_error


def test_non_finite_reference_entries_must_be_matched_exactly():
    ref = torch.tensor([1.0, float("inf"), float("nan"), -float("inf"), 2.0])
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1e-3)
    same = compare("y", ref.clone(), ref, tol)
    assert same.ok and same.max_abs_error == 0.0 and same.l2_rel_error == 0.0
    for k, value in ((1, -float("inf")), (2, 0.0), (3, float("nan"))):
        out = ref.clone()
        out[k] = value
        result = compare("y", out, ref, tol)
        assert not result.ok and "differs where the reference is not finite" in result.reason
    off = ref.clone()
    off[4] = 2.5  # a finite entry beside the non-finite ones: named by its own index
    result = compare("y", off, ref, tol)
    assert not result.ok and "worst at [4]: got 2.5, expected 2" in result.reason
    everything = torch.full((3,), float("inf"))
    assert compare("y", everything.clone(), everything, tol).ok


def test_a_tolerance_s_outside_share_lets_that_many_elements_stray_and_no_more():
    """`outside`: a share of elements may miss the elementwise bound (rounding amplified in a few
    places); one more fails, and the L2 bound and the finite check still hold over all of them."""
    import pytest

    ref = torch.linspace(1, 2, 10_000)
    loose = BF16.model_copy(update={"outside": 0.001})  # 10 of 10,000
    out = ref.clone()
    out[:10] += 0.1
    assert not compare("y", out, ref, BF16).ok
    assert compare("y", out, ref, loose).ok and compare("y", out, ref, loose).outside == 10
    out[10] += 0.1
    result = compare("y", out, ref, loose)
    assert not result.ok and "11 of 10000 elements outside" in result.reason and "at most 10 may be" in result.reason
    wild = ref.clone()
    wild[:5] = 1e4  # five strays, but far enough to break the L2 bound
    assert "relative L2 error" in compare("y", wild, ref, loose).reason
    wild[:5] = ref[:5]
    wild[0] = float("nan")
    assert "NaN" in compare("y", wild, ref, loose).reason
    with pytest.raises(ValueError):
        Tolerance(atol=0.02, rtol=0.02, l2=0.01, outside=0.02)  # over OUTSIDE_CAP


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 24])
def test_chunks_give_the_figures_and_the_verdict_of_one_pass(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """The comparison runs CHUNK elements at a time (its memory bounded for outputs of many GB):
    any chunk size gives the same verdict, reason and figures, the worst element included."""
    generator = torch.Generator().manual_seed(7)
    ref = torch.randn(12, 17, generator=generator)
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1e-2)
    far = ref.clone()
    far[3, 5] += 0.5
    far[9, 16] -= 2.0  # the worst
    noisy = ref + 1e-4 * torch.randn(12, 17, generator=generator)
    special = ref.clone()
    special[0, 0], special[11, 1] = float("inf"), float("nan")
    special_out = special.clone()
    special_out[6, 6] += 1.0
    cases = [(noisy, ref), (far, ref), (special_out, special), (special.clone(), special)]
    whole = [compare("y", o, r, tol) for o, r in cases]
    monkeypatch.setattr(compare_module, "CHUNK", chunk)
    for (o, r), expected in zip(cases, whole):
        got = compare("y", o, r, tol)
        assert (got.ok, got.status, got.reason, got.outside) == (
            expected.ok,
            expected.status,
            expected.reason,
            expected.outside,
        )
        assert got.max_abs_error == pytest.approx(expected.max_abs_error)
        assert got.max_rel_error == pytest.approx(expected.max_rel_error)
        assert got.l2_rel_error == pytest.approx(expected.l2_rel_error)
    assert "worst at [9, 16]" in whole[1].reason and "worst at [6, 6]" in whole[2].reason


def test_a_finite_reference_gives_the_figures_of_the_masked_comparison_and_an_equal_output_zeros():
    """A chunk whose reference is finite throughout skips the masking of non-finite entries;
    with one matched infinity appended (which the masking leaves out of every figure) the
    same outputs take the masked path and must give the same figures, bit for bit. An output
    equal to the reference is PASSED with zeros without the float64 passes; one with a NaN
    where the reference has one is not `equal` and goes through them, still PASSED."""
    generator = torch.Generator().manual_seed(11)
    ref = torch.randn(300, generator=generator)
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1e-2)
    out = ref + 1e-3 * torch.randn(300, generator=generator)
    out[17] = float("nan")
    for candidate in (ref + 1e-5, out, torch.zeros_like(ref)):
        finite = compare("y", candidate, ref, tol)
        inf = torch.tensor([float("inf")])
        masked = compare("y", torch.cat([candidate, inf]), torch.cat([ref, inf]), tol)
        figures = ("ok", "status", "max_abs_error", "max_rel_error", "l2_rel_error", "outside")
        assert [getattr(finite, k) for k in figures] == [getattr(masked, k) for k in figures]
        assert finite.reason.replace("of 300 ", "of 301 ") == masked.reason
    equal = compare("y", ref.clone(), ref, tol)
    assert equal.ok and (equal.max_abs_error, equal.max_rel_error, equal.l2_rel_error) == (0.0, 0.0, 0.0)
    with_nan = ref.clone()
    with_nan[3] = float("nan")
    assert compare("y", with_nan.clone(), with_nan, tol).ok


def test_a_comparison_without_its_worst_element_gives_the_same_verdict_and_figures():
    """`worst=False` (the problem check's trial comparisons read only `ok`) skips looking for the
    worst element, in the finite and the masked way alike; every figure and the verdict stay."""
    generator = torch.Generator().manual_seed(5)
    ref = torch.randn(4000, generator=generator)
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1.0)
    off = ref + 1e-2 * torch.randn(4000, generator=generator)
    for candidate, reference in (
        (off, ref),
        (torch.cat([off, torch.tensor([float("inf")])]), torch.cat([ref, torch.tensor([float("inf")])])),
    ):
        named, quiet = compare("y", candidate, reference, tol), compare("y", candidate, reference, tol, worst=False)
        figures = ("ok", "status", "max_abs_error", "max_rel_error", "l2_rel_error", "outside")
        assert not named.ok and [getattr(named, k) for k in figures] == [getattr(quiet, k) for k in figures]
        assert "worst at" in named.reason and quiet.reason == named.reason.split("; worst at")[0]


def test_a_verdict_only_comparison_gives_the_whole_comparison_s_verdict():
    """`verdict_only` (the problem check's trials) may stop at a failure in the first PROBE
    elements; every verdict is the whole comparison's, a failure only past them included."""
    n, probe = 3 * compare_module.PROBE, compare_module.PROBE
    generator = torch.Generator().manual_seed(7)
    ref = torch.randn(n, generator=generator)
    tol = Tolerance(atol=1e-3, rtol=1e-3, l2=1e-2)
    close = ref + 1e-5 * torch.randn(n, generator=generator)
    late = close.clone()
    late[probe + 5 :] = 0.0  # wrong only past the prefix
    nan = close.clone()
    nan[10] = float("nan")
    ref_inf = ref.clone()
    ref_inf[3] = float("inf")
    few = close.clone()
    few[:40] += 1.0  # 40 outside: under a share of 1% of the whole, over one of 0.1%
    cases = [
        (close, ref, tol, True, False),
        (torch.zeros(n), ref, tol, False, True),  # a trivial answer: decided on the prefix
        (ref.mean().expand(n), ref, tol, False, True),
        (late, ref, tol, False, False),
        (nan, ref, tol, False, True),
        (close, ref_inf, tol, False, True),  # the infinity not matched
        (torch.where(ref_inf.isinf(), ref_inf, close), ref_inf, tol, True, False),
        (few, ref, tol.model_copy(update={"outside": 0.01, "l2": 1.0}), True, False),
        (few, ref, tol.model_copy(update={"outside": 0.0001, "l2": 1.0}), False, True),
        (close * 1.02, ref, tol.model_copy(update={"atol": 1.0, "rtol": 1.0}), False, False),  # the L2 bound
    ]
    for out, reference, t, ok, early in cases:
        whole, quick = compare("y", out, reference, t), compare("y", out, reference, t, verdict_only=True)
        assert whole.ok is quick.ok is ok, (whole.reason, quick.reason)
        assert (f"in its first {probe} elements" in quick.reason) is early, quick.reason
        if not early:
            assert quick.reason == whole.reason
