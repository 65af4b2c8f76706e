"""`gpuarena check`: is a problem well formed, and does it defeat trivial answers?

A problem where returning zeros, a constant, or an input unchanged would pass is rejected:
such a problem cannot tell a kernel from a cheat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from gpuarena.errors import GpuarenaError
from gpuarena.harness.bitwise import equal as bitwise_equal
from gpuarena.harness.compare import compare, judged
from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.session import as_outputs
from gpuarena.problems.loader import Problem, load_problem
from gpuarena.problems.model import OUTSIDE_CAP, Workload, unmet_requirements


@dataclass
class CheckReport:
    name: str
    errors: list[str] = field(default_factory=list)
    summary: str = ""
    notes: list[str] = field(default_factory=list)
    """What the check found and let pass, for the author to know: outputs under atol everywhere
    (only the L2 bound judges them), a reference that differs between runs by rounding alone."""
    outside_needed: dict[str, float] = field(default_factory=dict)
    """By dtype: the tolerance's `outside` that would let the reference's own float32 computation
    pass, where rounding amplified in a few elements failed it (see _rounding_amplified)."""

    @property
    def ok(self) -> bool:
        return not self.errors


def _draw(problem: Problem, workload: Workload, device: torch.device, seed: int) -> dict[str, Any]:
    generator = torch.Generator(device=device).manual_seed(seed)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, device, generator)


CALL_SEED = 7
"""The seed torch's generators get before each call of a reference that draws in its calls
(ProblemSpec.seeded_calls), as the harness seeds them before each call on an input set."""


def _run(problem: Problem, inputs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    if problem.spec.seeded_calls:
        torch.manual_seed(CALL_SEED)
    with torch.no_grad():
        return as_outputs(problem.reference(**inputs))


def _same(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> bool:
    return all(bitwise_equal(x, y) for x, y in zip(a, b))


def _passes(
    problem: Problem,
    workload: Workload,
    candidate: tuple[torch.Tensor, ...],
    ref: tuple[torch.Tensor, ...],
    inputs: dict[str, Any],
    within: float = 1.0,
) -> bool:
    """Whether `candidate` would pass as the outputs for `inputs`, as the harness judges it (with
    the tolerance's bounds scaled by `within`; a problem's own checker judges as it is)."""
    checker = problem.checker
    if checker is not None:
        return judged(checker, problem.spec.outputs, candidate, ref, inputs).ok
    tol = problem.spec.tolerance_for(workload.dtype)
    if within != 1.0:
        tol = tol.model_copy(update={"atol": tol.atol * within, "rtol": tol.rtol * within, "l2": tol.l2 * within})
    return all(
        compare(n, c, r, tol, worst=False, verdict_only=True).ok
        for n, c, r in zip(problem.spec.outputs, candidate, ref)
    )


RUN_TO_RUN = 0.5
"""Two runs of a reference on the same inputs may differ by rounding alone (a GPU's atomics sum
in another order each run: cuDNN's transposed convolutions, scatter-adds) where they stay within
this share of the tolerance: a solution is judged against one run, and an honest one as
nondeterministic still has the rest of the tolerance. More than that is a reference that draws
or reads something unseeded, which no solution can match (KernelBench @423217d: 7 transposed
convolutions of levels 1-2 differed on an H200, bitwise equal on the CPU)."""


def _largest_difference(a: tuple[torch.Tensor, ...], b: tuple[torch.Tensor, ...]) -> float:
    return max(
        (float((x.double() - y.double()).abs().max()) for x, y in zip(a, b) if x.numel() and x.shape == y.shape),
        default=math.inf,
    )


REDUCED = (torch.float16, torch.bfloat16)


OUTSIDE_MARGIN = 2
"""A tolerance derived from the reference's own error lets this many times as many elements
fall outside as its float32 computation has beyond half the bound (HONEST_SPREAD): an honest
kernel misses the bound only where the reference's error or its own passes half of it, and its
own rounding errs about as often as the reference's."""


HONEST_SPREAD = 2
"""An honest reduced-precision kernel rounds in places of its own: it can stand as far from the
reference as its own rounding plus the reference's, about twice the distance of the float32
computation (whose own rounding is negligible). So the elements at risk are those where the
float32 computation comes within 1/HONEST_SPREAD of the bound's edge. Measured on an H200:
torch.compile of the dataset's bfloat16 fusions missed the bound on 3 of 500 million to 0.9% of
elements where the float32 computation met it everywhere (docs/dataset.md)."""


def rounding_share(
    problem: Problem,
    workload: Workload,
    exact: tuple[torch.Tensor, ...],
    ref: tuple[torch.Tensor, ...],
    within: float = 1.0,
) -> float | None:
    """The largest share, over the outputs, of elements where `exact` (the reference computed in
    float32, rounded back) falls outside the elementwise bound (scaled by `within`); None where
    more than that fails (NaN or Inf where the reference is finite, the L2 bound, an integer
    output that differs)."""
    tol = problem.spec.tolerance_for(workload.dtype)
    every = tol.model_copy(
        update={"outside": 1.0, "atol": tol.atol * within, "rtol": tol.rtol * within}
    )  # count them all
    shares = [0.0]
    for name, e, r in zip(problem.spec.outputs, exact, ref):
        comparison = compare(name, e, r, every)
        if not comparison.ok:
            return None  # not the elementwise bound: no share of elements fixes it
        shares.append(comparison.outside / max(r.numel(), 1))
    return max(shares)


def derived_outside(share: float) -> float | None:
    """The `outside` a tolerance needs for a measured rounding share (OUTSIDE_MARGIN times it, one
    significant digit up), or None where that is more than a tolerance may allow (OUTSIDE_CAP)."""
    wanted = OUTSIDE_MARGIN * share
    if wanted <= 0:
        return 0.0
    digit = 10 ** math.floor(math.log10(wanted))
    rounded = math.ceil(wanted / digit) * digit
    return float(f"{rounded:.1g}") if rounded <= OUTSIDE_CAP else None


def _rounding_amplified(
    problem: Problem,
    workload: Workload,
    inputs: dict[str, Any],
    ref: tuple[torch.Tensor, ...],
    needs: dict[str, float] | None = None,
) -> list[str]:
    """A reduced-precision problem must tolerate rounding: the reference computed in float32 from
    the same inputs (rounded back to the workload's dtype) has to pass against the reference
    itself. Where it does not, the problem amplifies rounding (a saturated softmax, say), and an
    honest kernel that rounds differently, as every fused one does, fails. A reference that
    cannot run in float32 is not judged here. Where a small share of elements is all that
    fails, `needs` gets the `outside` that would let it pass (derived_outside of the share beyond
    half the bound, HONEST_SPREAD), by dtype; also where the float32 computation passes but comes
    that near the bound's edge on some elements."""
    if workload.torch_dtype not in REDUCED:
        return []
    wide = {n: v.float() if isinstance(v, torch.Tensor) and v.dtype in REDUCED else v for n, v in inputs.items()}
    try:
        exact = _run(problem, wide)
    except Exception:  # a reference written for its dtype only: nothing to compare
        return []
    if len(exact) != len(ref) or any(not isinstance(e, torch.Tensor) or e.shape != r.shape for e, r in zip(exact, ref)):
        return []
    rounded = tuple(e.to(r.dtype) for e, r in zip(exact, ref))
    near = rounding_share(problem, workload, rounded, ref, 1 / HONEST_SPREAD) if problem.checker is None else None
    outside = derived_outside(near) if near is not None else None
    if outside and needs is not None:  # also where the float32 computation passes: honest kernels may not
        needs[workload.dtype] = max(needs.get(workload.dtype, 0.0), outside)
    if _passes(problem, workload, rounded, ref, inputs):
        return []
    share = rounding_share(problem, workload, rounded, ref) if problem.checker is None else None
    hint = "draw the inputs at the model's scale or widen the tolerance"
    if share is not None:
        hint = (
            f"{share * 100:.3g}% of its elements fall outside the elementwise bound "
            + (f"({near * 100:.3g}% beyond half of it); " if near is not None else "; ")
            + (
                f"a tolerance with outside = {outside:g} would allow that"
                if outside is not None
                else f"too many for a tolerance to let fall outside ({OUTSIDE_MARGIN} times the share beyond "
                f"half the bound is over the most, {OUTSIDE_CAP:g})"
            )
        )
    return [
        f"workload {workload.name}: the reference computed in float32 from the same inputs fails against the "
        f"{workload.dtype} reference, so rounding alone fails honest kernels; {hint}"
    ]


def _tiny_outputs(
    problem: Problem,
    workload: Workload,
    inputs: dict[str, Any],
    ref: tuple[torch.Tensor, ...],
    tiny: list[int],
    notes: list[str],
) -> list[str]:
    """Outputs under atol everywhere: elementwise bounds cannot tell them from zeros, so only the
    relative L2 bound judges them (zeros are tried through the whole comparison later). That
    holds where their values are the computation's (KernelBench's 23_Softmax at its published
    size, about 4e-6 an element), not its rounding: an output that is rounding around zero (the
    mean of a GroupNorm's output, 3e-8) differs from the same reference computed in float64 by
    about itself, and no honest kernel's rounding matches. Where the float64 computation cannot
    run, such an output is refused as before."""
    if not tiny:
        return []
    where = f"workload {workload.name}"
    tol = problem.spec.tolerance_for(workload.dtype)
    wide = {n: v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for n, v in inputs.items()}
    try:
        exact = _run(problem, wide)
    except Exception:
        exact = ()
    errors: list[str] = []
    for k in tiny:
        name, r = problem.spec.outputs[k], ref[k]
        largest = float(r.abs().max())
        recomputed = exact[k] if k < len(exact) and isinstance(exact[k], torch.Tensor) else None
        if recomputed is None or recomputed.shape != r.shape:
            errors.append(
                f"{where}: output {name} is smaller than atol={tol.atol:g} everywhere (max {largest:.3g}), so "
                "elementwise checks cannot tell it from zeros, and the reference could not be computed in float64 "
                "to show its values are not rounding; scale the inputs"
            )
            continue
        judged_here = compare(name, recomputed.to(r.dtype), r, tol)
        if judged_here.ok:
            notes.append(
                f"{where}: output {name} is smaller than atol={tol.atol:g} everywhere (max {largest:.3g}): "
                f"only the relative L2 bound (l2={tol.l2:g}) judges it"
            )
        else:
            errors.append(
                f"{where}: output {name} is smaller than atol={tol.atol:g} everywhere (max {largest:.3g}) and is "
                f"rounding: the reference computed in float64 differs from it by {judged_here.l2_rel_error or 0:.3g} "
                f"(relative L2; the bound is {tol.l2:g}), so no honest kernel can pass; scale the inputs"
            )
    return errors


def check_workload(
    problem: Problem,
    workload: Workload,
    device: torch.device,
    needs: dict[str, float] | None = None,
    notes: list[str] | None = None,
    trivial: list[str] | None = None,
) -> list[str]:
    """Everything wrong with one workload of a problem (`needs`: see _rounding_amplified; `notes`
    gets what it found and let pass). Where `trivial` is given, the findings that a trivial
    answer passes or an input does not matter go there instead (check_problem weighs them)."""
    notes = [] if notes is None else notes
    found = check_one(problem, workload, device, needs, notes)
    if trivial is None:
        return found.errors + found.trivial
    trivial += found.trivial
    return found.errors


@dataclass
class _Found:
    errors: list[str] = field(default_factory=list)
    """The workload is broken: its inputs, the reference's outputs or their rounding."""
    trivial: list[str] = field(default_factory=list)
    """A trivial answer passes it, or an input does not matter to it."""

    def weak(self, problem: Problem, finding: str, exact: bool, notes: list[str]) -> None:
        """A trivial finding. On a problem kept as its peer states it, one whose trivial answer
        is the reference's own output bit for bit is a note: there the task's data makes the
        computation trivial (GPU MODE's gated_deltanet_chunk_fwd_o draws a gate whose exp
        underflows where h is read, so h never matters; a one-chunk fwd_h's states are zeros),
        no tolerance hides a wrong answer, and the peer's check accepts the same answers."""
        if exact and problem.spec.tolerance_as_stated:
            notes.append(
                f"{finding}: exactly, by the task's own data ({problem.spec.tolerance_as_stated}'s, kept as stated)"
            )
        else:
            self.trivial.append(finding)


def check_one(
    problem: Problem, workload: Workload, device: torch.device, needs: dict[str, float] | None, notes: list[str]
) -> _Found:
    """check_workload's findings, the broken apart from the trivial."""
    found = _Found()
    errors, trivial = found.errors, found.trivial
    where = f"workload {workload.name}"
    names = problem.input_names
    inputs = _draw(problem, workload, device, 1)
    if not isinstance(inputs, dict) or list(inputs) != names:
        got = list(inputs) if isinstance(inputs, dict) else type(inputs).__name__
        errors.append(
            f"{where}: make_inputs() returned {got}; it must return a dict keyed like reference{tuple(names)}"
        )
        return found
    for name, value in inputs.items():
        if isinstance(value, torch.Tensor):
            if backend_named(device.type).pin(value.device) != backend_named(device.type).pin(device):
                errors.append(f"{where}: input {name} is on {value.device}, not on the device given to make_inputs")
            if value.numel() > 1 and bool((value == value.reshape(-1)[0]).all()):
                errors.append(f"{where}: input {name} is constant; draw random values with a random scale and offset")
    if errors:
        return found
    if not _same(
        tuple(v for v in inputs.values() if isinstance(v, torch.Tensor)),
        tuple(v for v in _draw(problem, workload, device, 1).values() if isinstance(v, torch.Tensor)),
    ):
        errors.append(
            f"{where}: make_inputs() is not reproducible from the generator; draw every random number from it"
        )
    ref = _run(problem, inputs)
    if len(ref) != len(problem.spec.outputs) or not all(isinstance(r, torch.Tensor) for r in ref):
        errors.append(
            f"{where}: reference() returned {len(ref)} value(s); problem.toml names outputs {problem.spec.outputs}"
        )
        return found
    tiny: list[int] = []
    for k, (out_name, r) in enumerate(zip(problem.spec.outputs, ref)):
        r = r.float() if r.is_floating_point() and r.element_size() == 1 else r  # fp8: no isfinite, max
        if r.is_floating_point() and not bool(torch.isfinite(r).all()):
            errors.append(f"{where}: output {out_name} has NaN or Inf values")
        constant = r.numel() > 1 and bool((r == r.reshape(-1)[0]).all())
        if constant:
            found.weak(problem, f"{where}: output {out_name} is constant, so a constant answer would pass", True, notes)
        tol = problem.spec.tolerance_for(workload.dtype)
        if r.is_floating_point() and r.numel() and tol.atol > 0 and float(r.abs().max()) < tol.atol and not constant:
            tiny.append(k)  # a constant one (zeros) is trivial already: it is no rounding
    errors += _tiny_outputs(problem, workload, inputs, ref, tiny, notes)
    again = _run(problem, inputs)
    if not _same(ref, again):
        largest = _largest_difference(ref, again)
        if _passes(problem, workload, again, ref, inputs, RUN_TO_RUN):
            notes.append(
                f"{where}: two runs of reference() on the same inputs differ by rounding alone "
                f"(at most {largest:.3g}, within {RUN_TO_RUN:g} of the tolerance)"
            )
        else:
            errors.append(
                f"{where}: reference() is not deterministic (two runs on the same inputs differ by up to "
                f"{largest:.3g}, more than {RUN_TO_RUN:g} of the tolerance)"
                + (
                    ""
                    if problem.spec.seeded_calls
                    else "; if it draws from torch's generator, say `seeded_calls = true`"
                )
            )
    if problem.checker is not None:
        own = judged(problem.checker, problem.spec.outputs, ref, ref, inputs)
        if not own.ok:
            errors.append(f"{where}: the problem's checker rejects the reference's own outputs ({own.reason})")
    if errors:
        return found
    rounding = _rounding_amplified(problem, workload, inputs, ref, needs)
    if problem.spec.tolerance_as_stated:  # the peer's own tolerance, kept: its verdicts, said
        notes += [f"{r} (the tolerance is {problem.spec.tolerance_as_stated}'s, kept as stated)" for r in rounding]
    else:
        errors += rounding
    zeros = tuple(torch.zeros_like(r) for r in ref)
    if _passes(problem, workload, zeros, ref, inputs):
        found.weak(
            problem,
            f"{where}: returning zeros passes the tolerance; scale the inputs so outputs are not tiny, or tighten the tolerance",
            _same(zeros, ref),
            notes,
        )
    # the mean of a one-element output is that output: only outputs of several elements are
    # replaced by their mean (integer and boolean outputs are kept exact)
    spread = [r.is_floating_point() and r.numel() > 1 for r in ref]
    means = tuple(torch.full_like(r, float(r.double().mean())) if wide else r.clone() for r, wide in zip(ref, spread))
    if any(spread) and _passes(problem, workload, means, ref, inputs):
        found.weak(
            problem,
            f"{where}: returning the mean everywhere passes; outputs must vary more than the tolerance",
            _same(means, ref),
            notes,
        )
    for name, value in inputs.items():
        if (
            isinstance(value, torch.Tensor)
            and len(ref) == 1
            and value.shape == ref[0].shape
            and value.dtype == ref[0].dtype
        ):
            if _passes(problem, workload, (value.clone(),), ref, inputs):
                found.weak(problem, f"{where}: returning input {name} unchanged passes", _same((value,), ref), notes)
    other = _draw(problem, workload, device, 2)
    fixed = getattr(problem.module, "fixed_inputs", None)  # a peer's recorded data: the same every draw
    recorded = set(fixed(dict(workload.axes))) if callable(fixed) else set()
    by_design = getattr(problem.module, "unread_inputs", None)  # the author's word: data for solutions only
    unread = set(by_design(dict(workload.axes))) if callable(by_design) else set()
    ignored: dict[str, bool] = {}  # an input the output does not depend on: whether bit for bit
    for name, value in inputs.items():
        if not isinstance(value, torch.Tensor) or name in recorded:
            continue
        changed = dict(inputs)
        changed[name] = other[name]
        if bitwise_equal(other[name], value):
            trivial.append(f"{where}: input {name} is the same for two seeds; draw it from the generator")
        elif name not in unread and _passes(problem, workload, (without := _run(problem, changed)), ref, inputs):
            ignored[name] = _same(without, ref)
    data = sum(_nbytes(v) for n, v in inputs.items() if isinstance(v, torch.Tensor) and n not in unread)
    share = sum(_nbytes(inputs[name]) for name in ignored) / max(data, 1)
    for name, exact in ignored.items():
        finding = f"{where}: the output does not depend on input {name} (a fresh {name} gives a passing output)"
        if exact or share > FADED_SHARE:
            found.weak(problem, finding, exact, notes)
        else:
            notes.append(
                f"{finding}, within the tolerance though not bit for bit; the inputs so found hold {share:.1%} "
                f"of its input bytes (at most {FADED_SHARE:.2%} may), so a solution that skips them still reads the rest"
            )
    return found


FADED_SHARE = 1 / 16
"""The share of a workload's input bytes that inputs whose effect fades under the tolerance may
hold, the problem passing with a note. An RNN's initial state fades over a long sequence:
KernelBench's LSTMHn at its published size (512 steps) gives an h_n that a fresh h0 and c0 move
less than 1e-4, yet they are 4.5% of its inputs, and a solution that skips them still runs the
whole recurrence. More than that share, a solution could skip much of its data: refused. An
input the output ignores bit for bit is refused at any size: it is the problem's mistake."""


def _nbytes(value: torch.Tensor) -> int:
    return value.numel() * value.element_size()


def _weighed(problem: Problem, workloads: list[Workload], trivial: dict[str, list[str]], notes: list[str]) -> list[str]:
    """The trivial findings that refuse the problem. On a timed workload every one does: a
    solution could tell that workload apart and answer trivially where it is timed. On one
    checked for correctness only (a peer's tests: GPU MODE's QR of an upper-triangular matrix,
    whose Q-less output is zeros; its Cholesky of diagonal matrices, drawn alike for every seed)
    none does while another workload checked here has none: the solution must pass them all, so
    answering one trivially gains it nothing. Those are notes."""
    judging = [w for w in workloads if not trivial.get(w.name)]
    errors: list[str] = []
    for workload in workloads:
        found = trivial.get(workload.name, [])
        if workload.timed or not judging:
            errors += found
        else:
            notes += [f"{f} (checked for correctness only; {judging[0].name} and others judge)" for f in found]
    return errors


def check_problem(folder: Path | str, device: str = "cpu") -> CheckReport:
    report = CheckReport(name=str(folder))
    try:
        problem = load_problem(folder)
        report.name = problem.id
        missing = problem.spec.missing_packages()
        if missing:  # before the reference is imported: it would fail on the import, unexplained
            report.errors.append(unmet_requirements(problem.id, missing))
            return report
        _ = problem.module  # import the reference now, so errors show here
    except GpuarenaError as exc:
        report.errors.append(str(exc))
        return report
    dev = torch.device(device)
    runnable = problem.spec.workloads_for(dev.type)
    # nothing to check on this device is a failure; a problem whose data only a GPU can make
    # (an imported GPU MODE task, say) passes when checked on the GPU
    if not runnable:
        where = dev.type.upper() if backend_named(dev.type).accelerator else "the CPU"
        report.errors.append(
            f"{problem.path / 'problem.toml'}: no workload runs on {where} "
            '(fix: add small workloads with devices = ["cpu", "cuda"])'
        )
    trivial: dict[str, list[str]] = {}
    for workload in runnable:
        try:
            found = trivial.setdefault(workload.name, [])
            report.errors += check_workload(problem, workload, dev, report.outside_needed, report.notes, found)
        except Exception as exc:
            report.errors.append(f"workload {workload.name}: {type(exc).__name__}: {exc}")
    report.errors += _weighed(problem, runnable, trivial, report.notes)
    n_gpu = len(problem.spec.workloads) - len(problem.spec.workloads_for("cpu"))
    report.summary = f"level {problem.spec.level}, {len(runnable)} workload(s) checked on {dev.type}" + (
        f", {n_gpu} GPU-only not run here" if not backend_named(dev.type).accelerator and n_gpu else ""
    )
    return report
