"""Bit-for-bit comparison of inputs without copies (harness/bitwise.py): the check that no input
changed made two contiguous copies of every input that is not contiguous (DeepSeek-V3's experts'
weights in their recorded strides, 14 GiB each, on an H200), and torch.equal on a GPU is
`eq().all()`, a temporary of a byte per element. The views and the chunks must see what the
bytes of the copies saw."""

from __future__ import annotations

import pytest
import torch

from gpuarena.harness import bitwise


def _bytes_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The old comparison: the bytes of contiguous copies."""
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))


def _layouts() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    base = torch.randn(6, 5, 4, generator=g)
    return [
        base,
        base.transpose(0, 2),  # transposed, as a harvested weight is kept
        base[:, ::2],  # a gap in the strides
        torch.randn(5, 1, generator=g).expand(5, 7),  # broadcast: stride 0
        base.to(torch.bfloat16).permute(1, 0, 2),
        base.to(torch.float64)[1:, 2:],
        torch.randn(4, 3, dtype=torch.complex64, generator=g).t(),
        (base > 0).transpose(0, 1),
        torch.randint(-9, 9, (4, 6), dtype=torch.int8, generator=g).t(),
        torch.tensor(2.5),  # 0-dim
    ]


@pytest.mark.quick
@pytest.mark.parametrize("index", range(len(_layouts())))
def test_a_view_compares_as_the_bytes_of_its_copy_did(index):
    """Each layout against a contiguous copy of itself: equal; with the lowest bit of its last
    element flipped: not, as the bytes of contiguous copies said."""
    a = _layouts()[index]
    same = a.contiguous().clone()
    assert bitwise.equal(a, same) and _bytes_equal(a, same) and not bool(bitwise.differs(a, same))
    changed = same.clone()
    flat = changed.view(-1)
    if changed.dtype == torch.bool:
        flat[-1] = not bool(flat[-1])
    else:
        last = bitwise.bits(flat)
        assert last is not None
        last.view(-1)[-1] ^= 1
    assert not bitwise.equal(a, changed) and not _bytes_equal(a, changed)
    assert bool(bitwise.differs(a, changed))


@pytest.mark.quick
def test_no_input_is_copied_and_each_comparison_is_a_chunk(monkeypatch):
    """A transposed input of 4 chunks is compared in place (Tensor.contiguous refused) and no
    torch.equal sees more than a chunk; one changed element in the last chunk is found."""
    monkeypatch.setattr(bitwise, "CHUNK_ELEMENTS", 1000)
    seen: list[int] = []
    real = torch.equal

    def counted(x: torch.Tensor, y: torch.Tensor) -> bool:
        seen.append(x.numel())
        return real(x, y)

    a = torch.randn(40, 100).t()  # 4,000 elements, not contiguous
    b = a.clone().t().contiguous().t()
    monkeypatch.setattr(torch, "equal", counted)
    monkeypatch.setattr(torch.Tensor, "contiguous", lambda self, *args, **kwargs: pytest.fail("copied"))
    assert bitwise.equal(a, b)
    assert sum(seen) == 4000 and max(seen) <= 1000
    b[-1, -1] += 1
    assert not bitwise.equal(a, b)


@pytest.mark.quick
def test_a_slice_larger_than_a_chunk_is_compared_a_level_down(monkeypatch):
    monkeypatch.setattr(bitwise, "CHUNK_ELEMENTS", 10)
    a = torch.arange(2 * 3 * 25, dtype=torch.float32).reshape(2, 3, 25)
    b = a.clone()
    assert bitwise.equal(a, b)
    b[1, 2, 24] = -b[1, 2, 24]
    assert not bitwise.equal(a, b)


@pytest.mark.quick
def test_a_negative_zero_and_a_nan_are_told_by_their_bits():
    zero, negative = torch.zeros(3), torch.zeros(3)
    negative[1] = -0.0
    assert not bitwise.equal(zero, negative)
    nan = torch.full((3,), float("nan"))
    assert bitwise.equal(nan, nan.clone())  # the same bits, though NaN != NaN
    assert not bitwise.equal(torch.zeros(3), torch.zeros(4)) and bitwise.differs(torch.zeros(3), torch.zeros(3, 1))
