"""Is an output equal to the reference? Computed in the supervisor, never in the worker."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from gpuarena.problems.model import Tolerance


@dataclass
class Comparison:
    ok: bool
    status: str  # PASSED, WRONG_SHAPE, WRONG_DTYPE, WRONG_VALUES
    reason: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    l2_rel_error: float | None = None
    outside: int = 0
    """Elements outside the elementwise bound (counted where any are)."""


def compare(
    name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, *, worst: bool = True, verdict_only: bool = False
) -> Comparison:
    """Shape, dtype, NaN/Inf, elementwise closeness and relative L2 error of one output.
    `worst`: name the worst element in a failure's reason (a caller that reads only `ok`, such
    as the problem check's many trial comparisons, skips looking for it). `verdict_only`: such a
    caller's failures may end after the first PROBE elements (`_fails_early`)."""
    if out.shape != ref.shape:
        return Comparison(
            False, "WRONG_SHAPE", f"output {name} has shape {list(out.shape)}, expected {list(ref.shape)}"
        )
    if out.dtype != ref.dtype:
        return Comparison(False, "WRONG_DTYPE", f"output {name} has dtype {out.dtype}, expected {ref.dtype}")
    if out.numel() == 0 or torch.equal(out, ref):
        # bit for bit the reference's values (NaN never equals, so a NaN output goes on): every
        # figure below would be zero, in two cheap passes instead of thirty in float64
        return Comparison(True, "PASSED", "", 0.0, 0.0, 0.0)
    if not ref.is_floating_point():  # indices, ids, masks: exact, whatever the workload's float tolerance
        wrong = out != ref
        if bool(wrong.any()):
            first = list(map(int, torch.nonzero(wrong)[0]))
            diff = (out.double() - ref.double()).abs()
            rel = float((diff / ref.double().abs().clamp_min(1.0)).max())
            norm = float(torch.linalg.vector_norm(ref.double()))
            l2 = float(torch.linalg.vector_norm(diff)) / norm if norm > 0 else math.inf
            return Comparison(
                False,
                "WRONG_VALUES",
                f"output {name}: {int(wrong.sum())} of {out.numel()} elements differ "
                f"(integer output, compared exactly); first at {first}: got {out[tuple(first)].item()}, "
                f"expected {ref[tuple(first)].item()}",
                float(diff.max()),
                rel,
                l2,
            )
        return Comparison(True, "PASSED", "", 0.0, 0.0, 0.0)
    if verdict_only:
        failed = _fails_early(name, out, ref, tol)
        if failed is not None:
            return failed
    return _compare_floats(name, out, ref, tol, worst)


PROBE = 1 << 14
"""Elements a verdict-only comparison looks at first. Every way the float comparison fails but
the L2 bound's grows with the elements seen (a NaN or an infinity where the reference is finite,
a non-finite reference entry not matched, elements outside the bound past the share allowed of
the whole output), so a failure in a prefix is the whole output's. The problem check compares
hundreds of trivial answers (zeros, an input, a constant), nearly all of which fail at once:
those comparisons in float64 were 37% of the shipped dataset's check on a 2-core CPU."""


def _fails_early(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison | None:
    """The comparison's failure where the first PROBE elements already fail it, else None (compare
    the whole). Its figures are the prefix's: a lower bound, which a verdict-only caller never reads."""
    if out.numel() <= PROBE:
        return None
    f = _Figures()
    prefix = out.detach().reshape(-1)[:PROBE].to(torch.float64), ref.detach().reshape(-1)[:PROBE].to(torch.float64)
    _chunk(f, *prefix, 0, tol, False)
    allowed = int(tol.outside * out.numel())
    if f.bad:
        reason = f"has {'NaN' if f.bad_nan else 'Inf'} values where the reference is finite"
    elif f.mismatch:
        reason = "differs where the reference is not finite"
    elif f.outside > allowed:
        reason = f"has {f.outside} of {out.numel()} elements outside atol={tol.atol:g}, rtol={tol.rtol:g}"
    else:
        return None
    return Comparison(False, "WRONG_VALUES", f"output {name} {reason} in its first {PROBE} elements", outside=f.outside)


CHUNK = 1 << 24
"""Elements compared at a time. Whole float64 copies of a 6.4 GB output and their temporaries
took the supervisor to 18x the output's size (KernelBench's 23_Softmax held 11.5 GB of a CPU
supervisor for a 644 MB output, and 121 GiB of an H200); a chunk's float64 work is 128 MiB."""


@dataclass
class _Figures:
    """What the float comparison keeps of each chunk, summed or maxed over the chunks."""

    bad: int = 0
    bad_nan: bool = False
    mismatch: bool = False
    max_abs: float = 0.0
    max_rel: float = 0.0
    ref_sq: float = 0.0
    err_sq: float = 0.0
    outside: int = 0
    worst: float = -math.inf
    worst_at: int = -1
    worst_got: float = 0.0
    worst_expected: float = 0.0


def _chunk(f: _Figures, o: torch.Tensor, r: torch.Tensor, offset: int, tol: Tolerance, worst: bool) -> None:
    """Fold one chunk's figures in (o, r: float64, flat). The sums of squares come first, as
    dot products: they are finite only where every entry of both is (a square of a float32 is
    far inside float64's range), so a chunk that is finite throughout (nearly always) needs no
    masks, and its figures take about half the passes over the chunk; one with a NaN or an
    infinity goes the masked way. The worst element is looked for only in a chunk with
    elements outside the bound (and `worst`): it is only ever reported there."""
    diff = (o - r).abs_()
    size = r.abs()
    scaled = size * tol.rtol
    rel = diff / size.clamp_min_(max(tol.atol, 1e-30))
    ref_sq, err_sq, max_abs, max_rel, outside = torch.stack(
        [
            torch.dot(r, r),
            torch.dot(diff, diff),
            diff.max(),
            rel.max(),
            (diff > scaled.add_(tol.atol)).sum().to(torch.float64),
        ]
    ).tolist()  # one wait for the device per chunk
    if not (math.isfinite(ref_sq) and math.isfinite(err_sq)):
        _chunk_masked(f, o, r, offset, tol, worst)
        return
    f.max_abs, f.max_rel = max(f.max_abs, max_abs), max(f.max_rel, max_rel)
    f.ref_sq += ref_sq
    f.err_sq += err_sq
    f.outside += int(outside)
    if outside and worst:
        score = diff - tol.rtol * r.abs()
        worst_at = int(torch.argmax(score))
        highest, got, expected = torch.stack([score[worst_at], o[worst_at], r[worst_at]]).tolist()
        if highest > f.worst:
            f.worst, f.worst_at, f.worst_got, f.worst_expected = highest, offset + worst_at, got, expected


def _chunk_masked(f: _Figures, o: torch.Tensor, r: torch.Tensor, offset: int, tol: Tolerance, worst: bool) -> None:
    """`_chunk` for a chunk with a value that is not finite: entries where the reference is not
    finite are left out of the closeness figures; they must match exactly (checked here too)."""
    ref_finite = torch.isfinite(r)
    masked = not bool(ref_finite.all())
    diff = (o - r).abs_()
    size = r.abs()
    if masked:
        zero = r.new_zeros(())
        bad = ~torch.isfinite(o) & ref_finite
        mismatch = (~ref_finite & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))).any()
        diff, size = torch.where(ref_finite, diff, zero), torch.where(ref_finite, size, zero)
        bad_nan = (torch.isnan(o) & bad).any()
    else:
        bad = ~torch.isfinite(o)
        mismatch = torch.zeros((), dtype=torch.bool, device=r.device)
        bad_nan = torch.isnan(o).any()
    scaled = tol.rtol * size
    score = diff - scaled
    if masked:
        score = torch.where(ref_finite, score, -math.inf)
    worst_at = int(torch.argmax(score)) if score.numel() else 0
    figures = torch.stack(
        [
            bad.sum().to(torch.float64),
            bad_nan.to(torch.float64),
            mismatch.to(torch.float64),
            diff.max(),
            (diff / size.clamp_min(max(tol.atol, 1e-30))).max(),
            torch.dot(size, size),
            torch.dot(diff, diff),
            (diff > scaled.add_(tol.atol)).sum().to(torch.float64),
            score[worst_at],
            o[worst_at],
            r[worst_at],
        ]
    ).tolist()  # one wait for the device per chunk (and one for the mask, one for the worst)
    f.bad += int(figures[0])
    f.bad_nan = f.bad_nan or bool(figures[1])
    f.mismatch = f.mismatch or bool(figures[2])
    f.max_abs = max(f.max_abs, figures[3])
    f.max_rel = max(f.max_rel, figures[4])
    f.ref_sq += figures[5]
    f.err_sq += figures[6]
    f.outside += int(figures[7])
    if worst and figures[8] > f.worst:
        f.worst, f.worst_at, f.worst_got, f.worst_expected = figures[8], offset + worst_at, figures[9], figures[10]


def _compare_floats(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, worst: bool) -> Comparison:
    """The float comparison in float64 on the output's device, CHUNK elements at a time, so
    its memory is bounded whatever the output's size."""
    f = _Figures()
    flat_out, flat_ref = out.detach().reshape(-1), ref.detach().reshape(-1)
    for start in range(0, flat_out.numel(), CHUNK):
        o = flat_out[start : start + CHUNK].to(torch.float64)
        r = flat_ref[start : start + CHUNK].to(torch.float64)
        _chunk(f, o, r, start, tol, worst)
    if f.bad:
        return Comparison(
            False,
            "WRONG_VALUES",
            f"output {name} has {f.bad} {'NaN' if f.bad_nan else 'Inf'} values where the reference is finite",
        )
    if f.mismatch:  # non-finite reference entries must be matched exactly (same inf sign, NaN for NaN)
        return Comparison(False, "WRONG_VALUES", f"output {name} differs where the reference is not finite")
    ref_norm, err_norm = math.sqrt(f.ref_sq), math.sqrt(f.err_sq)
    l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    allowed = int(tol.outside * out.numel())  # the share the tolerance lets fall outside
    if f.outside > allowed:
        where = ""
        if f.worst_at >= 0:
            index = list(map(int, torch.unravel_index(torch.tensor(f.worst_at), out.shape)))
            where = f"; worst at {index}: got {f.worst_got:.6g}, expected {f.worst_expected:.6g}"
        return Comparison(
            False,
            "WRONG_VALUES",
            f"output {name}: {f.outside} of {out.numel()} elements outside atol={tol.atol:g}, rtol={tol.rtol:g}"
            f"{f' (at most {allowed} may be)' if tol.outside else ''}{where}",
            f.max_abs,
            f.max_rel,
            l2,
            f.outside,
        )
    if l2 > tol.l2:
        return Comparison(
            False,
            "WRONG_VALUES",
            f"output {name}: relative L2 error {l2:.3g} exceeds {tol.l2:g}",
            f.max_abs,
            f.max_rel,
            l2,
            f.outside,
        )
    return Comparison(True, "PASSED", "", f.max_abs, f.max_rel, l2, f.outside)


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def fingerprint(t: torch.Tensor) -> tuple[int, ...]:
    """Exact sums of a tensor's raw bits over strided subsets: any write that changes a value
    changes them (barring contrived compensation), without float temporaries of the tensor."""
    if t.numel() == 0:
        return ()
    bits = t.detach().reshape(-1).view(_SAME_SIZE_INT[t.element_size()])
    return tuple(int(v.sum(dtype=torch.int64)) for v in (bits, bits[::7], bits[3::13], bits[1::5]))


def judged(
    checker: Callable[..., Any],
    names: list[str],
    outputs: tuple[torch.Tensor, ...] | list[torch.Tensor],
    expected: tuple[torch.Tensor, ...],
    inputs: dict[str, Any],
) -> Comparison:
    """A problem's own checker (ProblemSpec.checker) on all outputs at once, after their shapes
    and dtypes are the reference's. What it returns is the verdict; a checker that fails on an
    output (a NaN where it indexes, say) rejects that output, with its error, and never stops
    the supervisor."""
    for name, out, ref in zip(names, outputs, expected):
        if out.shape != ref.shape:
            return Comparison(
                False, "WRONG_SHAPE", f"output {name} has shape {list(out.shape)}, expected {list(ref.shape)}"
            )
        if out.dtype != ref.dtype:
            return Comparison(False, "WRONG_DTYPE", f"output {name} has dtype {out.dtype}, expected {ref.dtype}")
    try:
        with torch.no_grad():
            problem = checker(dict(inputs), tuple(o.clone() for o in outputs), tuple(expected))
    except Exception as exc:  # the checker's own failure on this output is the verdict
        return Comparison(
            False,
            "WRONG_VALUES",
            f"the problem's checker failed on the outputs: {type(exc).__name__}: {str(exc)[:300]}",
        )
    if problem is None or problem == "" or problem is True:
        return Comparison(True, "PASSED", "")
    if problem is False:
        return Comparison(False, "WRONG_VALUES", "the problem's checker rejected the outputs")
    if isinstance(problem, tuple) and len(problem) == 2 and isinstance(problem[0], bool):  # (ok, message)
        return (
            Comparison(True, "PASSED", "")
            if problem[0]
            else Comparison(False, "WRONG_VALUES", f"the problem's checker: {str(problem[1])[:500]}")
        )
    return Comparison(False, "WRONG_VALUES", f"the problem's checker: {str(problem)[:500]}")
