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


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Shape, dtype, NaN/Inf, elementwise closeness and relative L2 error of one output."""
    if out.shape != ref.shape:
        return Comparison(
            False, "WRONG_SHAPE", f"output {name} has shape {list(out.shape)}, expected {list(ref.shape)}"
        )
    if out.dtype != ref.dtype:
        return Comparison(False, "WRONG_DTYPE", f"output {name} has dtype {out.dtype}, expected {ref.dtype}")
    if out.numel() == 0:
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
    # float64 on the output's device; the figures are read back together, one wait for the
    # device each (a run compares thousands of outputs: each read is a sync)
    o = out.detach().to(torch.float64)
    r = ref.detach().to(torch.float64)
    ref_finite = torch.isfinite(r)
    bad = ~torch.isfinite(o) & ref_finite
    any_bad, all_finite = torch.stack([bad.any(), ref_finite.all()]).tolist()
    if any_bad:
        kinds = "NaN" if bool(torch.isnan(o[bad]).any()) else "Inf"
        return Comparison(
            False, "WRONG_VALUES", f"output {name} has {int(bad.sum())} {kinds} values where the reference is finite"
        )
    # non-finite reference entries must be matched exactly (same inf sign, NaN for NaN)
    if not all_finite:
        mismatch = ~ref_finite & ~((o == r) | (torch.isnan(o) & torch.isnan(r)))
        if bool(mismatch.any()):
            return Comparison(False, "WRONG_VALUES", f"output {name} differs where the reference is not finite")
        o, r = o[ref_finite], r[ref_finite]
    diff = (o - r).abs()
    max_abs = max_rel = ref_norm = err_norm = 0.0
    all_close = True
    if diff.numel():
        size = r.abs()
        figures = torch.stack(
            [
                diff.max(),
                (diff / size.clamp_min(max(tol.atol, 1e-30))).max(),
                torch.linalg.vector_norm(r),
                torch.linalg.vector_norm(diff),  # |o - r|'s norm is o - r's
                (diff <= tol.atol + tol.rtol * size).all().to(torch.float64),
            ]
        ).tolist()
        max_abs, max_rel, ref_norm, err_norm, all_close = (
            figures[0],
            figures[1],
            figures[2],
            figures[3],
            bool(figures[4]),
        )
    l2 = err_norm / ref_norm if ref_norm > 0 else (0.0 if err_norm == 0 else math.inf)
    count = 0
    if not all_close:
        close = diff <= tol.atol + tol.rtol * r.abs()
        count = int((~close).sum())
        all_close = count <= int(tol.outside * out.numel())  # the share the tolerance lets fall outside
    if not all_close:
        worst = int(torch.argmax(diff - tol.rtol * r.abs()))
        index = list(map(int, torch.unravel_index(torch.tensor(worst), out.shape))) if all_finite else [worst]
        return Comparison(
            False,
            "WRONG_VALUES",
            f"output {name}: {count} of {out.numel()} elements outside atol={tol.atol:g}, rtol={tol.rtol:g}"
            f"{f' (at most {int(tol.outside * out.numel())} may be)' if tol.outside else ''}; "
            f"worst at {index}: got {float(o.reshape(-1)[worst]):.6g}, expected {float(r.reshape(-1)[worst]):.6g}",
            max_abs,
            max_rel,
            l2,
            count,
        )
    if l2 > tol.l2:
        return Comparison(
            False,
            "WRONG_VALUES",
            f"output {name}: relative L2 error {l2:.3g} exceeds {tol.l2:g}",
            max_abs,
            max_rel,
            l2,
            count,
        )
    return Comparison(True, "PASSED", "", max_abs, max_rel, l2, count)


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
