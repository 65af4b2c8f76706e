"""How accurate a solution's math is, next to the reference's own: both measured against the
trusted reference computed in float64 on the same inputs.

An elementwise tolerance loose enough for every honest float32 kernel (summation order,
fused multiply-adds) also admits TF32 tensor cores or bfloat16 accumulation, which the
contests gpuarena serves treat as a lower precision, not a faster kernel. The reference's own
error against float64 says what float32 math gives on these inputs; a problem that asks for
faithful math in a dtype (`faithful_dtypes` in problem.toml) admits solutions whose error is
at most FAITHFUL_FACTOR times that, plus FAITHFUL_FLOOR.

The float64 computation runs the reference unchanged under a torch-function mode that turns
every request for a narrower floating dtype (`.float()`, `.to(torch.float32)`, `dtype=`) into
float64, so references that cast internally (accumulate in float32, cast back) still run
wide. It runs in the supervisor: trusted code on the supervisor's private inputs.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from gpuarena.harness.compare import CHUNK

FAITHFUL_FACTOR = 8.0
"""A faithful solution's relative L2 error against float64 may be this many times the
reference's. Honest float32 orderings (blocked or split sums, fused multiply-adds) stay within
about 2x of the reference's error; TF32 inputs (10-bit mantissas) are 100x or more above it
(bench/results/precision-cpu.md)."""
FAITHFUL_FLOOR = 1e-9
"""An absolute allowance for outputs the reference computes exactly (relative L2)."""

_NARROW = (torch.float32, torch.float16, torch.bfloat16)


class _Widen(TorchFunctionMode):
    """Every narrower floating dtype asked for becomes float64."""

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple = (), kwargs: dict | None = None):
        kwargs = dict(kwargs or {})
        if func in (torch.Tensor.float, torch.Tensor.half, torch.Tensor.bfloat16):
            return args[0].double()
        args = tuple(torch.float64 if isinstance(a, torch.dtype) and a in _NARROW else a for a in args)
        for key, value in kwargs.items():
            if isinstance(value, torch.dtype) and value in _NARROW:
                kwargs[key] = torch.float64
        return func(*args, **kwargs)


@contextlib.contextmanager
def full_float32() -> Iterator[None]:
    """No TF32 and no reduced-precision reductions in what runs inside (the reference, when a
    problem asks for faithful math), whatever the process's settings."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    precision = torch.get_float32_matmul_precision()
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = reduced
        torch.set_float32_matmul_precision(precision)


def float64_reference(reference: Callable[..., Any], inputs: dict[str, Any]) -> tuple[torch.Tensor, ...] | str:
    """The reference's outputs computed in float64 on these inputs, or why that cannot be done."""
    wide = {k: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in inputs.items()}
    try:
        with torch.no_grad(), _Widen():
            outs = reference(**wide)
    except Exception as exc:  # a reference may not support float64 here
        return f"the reference does not run in float64 here ({type(exc).__name__}: {str(exc)[:200]})"
    return tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)


def relative_error(out: torch.Tensor, exact: torch.Tensor) -> float | None:
    """||out - exact|| / ||exact|| over the finite entries of a floating output (None otherwise),
    summed a chunk at a time (compare.CHUNK): no float64 copy of a whole output of many GB."""
    if not (out.is_floating_point() and exact.is_floating_point()) or out.shape != exact.shape or not out.numel():
        return None
    flat_out, flat_exact = out.detach().reshape(-1), exact.detach().reshape(-1)
    norm_sq = diff_sq = 0.0
    for start in range(0, flat_out.numel(), CHUNK):
        o = flat_out[start : start + CHUNK].double()
        e = flat_exact[start : start + CHUNK].double()
        finite = torch.isfinite(e) & torch.isfinite(o)
        d = o - e
        if not bool(finite.all()):  # where, not a boolean index: no copy of the finite entries
            zero = e.new_zeros(())
            e, d = torch.where(finite, e, zero), torch.where(finite, d, zero)
        sums = torch.stack([(e * e).sum(), (d * d).sum()]).tolist()
        norm_sq, diff_sq = norm_sq + sums[0], diff_sq + sums[1]
    norm, diff = math.sqrt(norm_sq), math.sqrt(diff_sq)
    return diff / norm if norm > 0 else (0.0 if diff == 0 else float("inf"))


def float64_bytes(inputs: dict[str, Any], outputs: tuple[torch.Tensor, ...]) -> int:
    """What the float64 computation holds at least: its inputs and outputs widened."""
    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)] + list(outputs)
    return sum(t.numel() * (8 if t.is_floating_point() else t.element_size()) for t in tensors)


def worst_error(
    outputs: tuple[torch.Tensor, ...] | list[torch.Tensor], exact: tuple[torch.Tensor, ...]
) -> float | None:
    """The largest relative error over the floating outputs."""
    errors = [e for e in (relative_error(o, x) for o, x in zip(outputs, exact)) if e is not None]
    return max(errors) if errors else None


def unfaithful(solution_error: float, reference_error: float) -> str:
    """Why a solution's error is beyond faithful math ('' when it is within)."""
    bound = FAITHFUL_FACTOR * reference_error + FAITHFUL_FLOOR
    if solution_error <= bound:
        return ""
    return (
        f"its error against a float64 computation ({solution_error:.3g}, relative L2) is {solution_error / max(reference_error, 1e-300):.0f}x "
        f"the reference's own ({reference_error:.3g}); this problem asks for faithful math in this dtype (at most "
        f"{FAITHFUL_FACTOR:g}x: no TF32, no lower-precision accumulation)"
    )
