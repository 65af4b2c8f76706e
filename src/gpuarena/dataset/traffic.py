"""A problem's `bytes` and `flops` formulas (problem.toml), derived from its reference, so that a
harvested problem gets a speed-of-light figure and the physical-floor check (harness/measure.py).

The floor rejects a time below what the device could do at best, so both figures are meant as
lower bounds of the work any correct solution does:

- bytes: the compulsory traffic of a perfect fused kernel. Every input element the reference
  reads is read once, every output element written once: sum over inputs of the distinct
  elements read times the element size, plus the same over the outputs. An input's dims of
  stride 0 (an expanded input) count once. An input reached only through a narrowing view
  (slice, select, ...) or an indexing op (index, gather, embedding, index_select: the source
  counts the elements gathered) counts what it is read through, at most its own size; an input
  the reference never reads counts nothing; an output that is an input's view (a solution may
  return the view) counts nothing, and so does an output repeated. Intermediates count nothing
  (a perfect kernel keeps them on chip). Limit: a gather whose indices repeat reads fewer
  distinct source rows than it gathers, which no trace can know; such a source counts whole.
- flops: the counts of `torch.utils.flop_counter.FlopCounterMode` for what it prices (matrix
  products 2*M*N*K, convolutions, attention; `_grouped_mm` is priced here as 2*rows(a)*K*N, its
  offsets covering every row; a causal scaled_dot_product_attention less the products of the
  pairs its mask drops, which a kernel need not compute), plus one FLOP per element for every
  other arithmetic op: an elementwise op (aten's pointwise tag) or a reduction, counted over the
  largest tensor the op reads or writes (a broadcast add: its output; a sum: its input), as the
  reference decomposes on the meta device (scaled_dot_product_attention: its math path).
  Data movement (views, copies, casts, concatenation, indexing, sorting, creating tensors)
  counts nothing; a problem with no arithmetic at all gets flops "0". JAX references count
  dot_general as 2 * output elements * contracted size, conv_general_dilated as 2 * output
  elements * kernel window, other primitives by the same one-per-element rule (a mask applied
  with select_n is not seen: its masked products count).

PyTorch references are traced once on fake tensors with symbolic sizes (a ShapeEnv: one symbol
for each axis), so the figures come out as expressions over the workload's axes, in the format
problems/model.py evaluates (+ - * / // % ** over axis names); sizes the reference fixes (a
reshape to [32, ...]) stay numbers. JAX references (`provenance.framework = "jax"`) are traced by
`jax.make_jaxpr` on each workload's shapes; each term's sizes are matched to the axes whose values
equal them in every workload (else a number the same in every workload). Either way the formulas
are then evaluated at every workload's axes and must give what a concrete trace of that workload
counts. Where none does (a merged problem's shapes: each model's has other axes of size 1, which
a symbolic trace specialises), each workload carries its own traced figure instead
(`Derived.workload_figures`); where the trace itself fails, the problem gets none
(`Derived.reason` says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from gpuarena.dataset.traffic_base import Derived, TrafficError, fake_inputs
from gpuarena.dataset.traffic_jax import jax_formulas
from gpuarena.problems.loader import Problem, load_problem
from gpuarena.problems.model import Workload, check_formula, evaluate_formula

COPIES = frozenset(
    {
        "clone",
        "copy",
        "copy_",
        "_to_copy",
        "to",
        "lift_fresh",
        "lift_fresh_copy",
        "contiguous",
        "_unsafe_view",
        "alias",
        "detach",
    }
)
"""Data movement that the elementwise rule does not count even where aten tags it pointwise."""
GATHERS = frozenset({"index", "index_select", "gather", "embedding", "take", "_embedding_bag"})
"""Ops whose first argument is read only where the indices point: it counts the elements gathered."""
REDUCTIONS = frozenset(
    {
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "prod",
        "var",
        "var_mean",
        "std",
        "std_mean",
        "norm",
        "linalg_vector_norm",
        "_softmax",
        "_safe_softmax",
        "_log_softmax",
        "softmax",
        "log_softmax",
        "logsumexp",
        "cumsum",
        "cumprod",
        "argmax",
        "argmin",
        "any",
        "all",
        "native_layer_norm",
        "_fused_rms_norm",
        "native_group_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "max_pool2d_with_indices",
        "avg_pool2d",
        "_adaptive_avg_pool2d",
        "upsample_nearest2d",
    }
)
"""Arithmetic ops aten does not tag pointwise: one FLOP per element of their largest tensor."""

# --- counting, over ints (a concrete trace) or SymInts (a symbolic one) ---------------------------


def _hint(value: Any) -> int:
    if isinstance(value, torch.SymInt):
        hint = value.node.hint
        if hint is None:
            raise TrafficError("a size has no concrete value (data-dependent shape)")
        return int(hint)
    return int(value)


def _distinct(t: torch.Tensor) -> Any:
    """Distinct elements a tensor view addresses (dims of stride 0 repeat; strides assumed not to
    overlap otherwise)."""
    total: Any = 1
    for size, stride in zip(t.shape, t.stride()):
        if _hint(stride) != 0 or _hint(size) <= 1:
            total = total * size
    return total


def _largest(values: Iterable[Any]) -> Any:
    best: Any = 0
    for v in values:
        if _hint(v) > _hint(best):
            best = v
    return best


ALIASES = frozenset({"_unsafe_view", "alias", "detach", "lift_fresh"})
"""Ops aten does not mark as views whose result a fused kernel reads as its argument."""


def _grouped_mm_flops(args: Sequence[Any]) -> Any:
    a, b = args[0], args[1]
    return 2 * a.numel() * b.shape[-1]


def _skipped_by_causal(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> Any:
    """FLOPs of the (query, key) pairs a causal mask drops (top-left aligned, as torch's is_causal
    is), in both products: 2 * batch-heads * pairs * (head dim + value head dim)."""
    sq, sk = query.shape[-2], key.shape[-2]
    kept = sq * (sq + 1) // 2 if _hint(sq) <= _hint(sk) else sk * (sk + 1) // 2 + (sq - sk) * sk
    heads: Any = 1
    for size in query.shape[:-2]:
        heads = heads * size
    return 2 * heads * (sq * sk - kept) * (query.shape[-1] + value.shape[-1])


def _count(problem: Problem, inputs: dict[str, Any]) -> tuple[Any, Any, list[str]]:
    """(bytes, flops, notes) of one run of the reference on these (fake) inputs."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    roots = {id(t): name for name, t in inputs.items() if isinstance(t, torch.Tensor)}
    keep: list[torch.Tensor] = [t for t in inputs.values() if isinstance(t, torch.Tensor)]  # ids stay unique
    reads: dict[str, list[Any]] = {name: [] for name in roots.values()}
    extra: list[Any] = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if func.namespace != "aten":
                return out
            name = func._schema.name.split("::")[-1]
            flat_in = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
            flat_out = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
            if func.is_view or name in ALIASES:
                root = roots.get(id(flat_in[0])) if flat_in else None
                if root is not None:
                    for t in flat_out:
                        roots[id(t)] = root
                        keep.append(t)
                return out
            for position, t in enumerate(flat_in):
                root = roots.get(id(t))
                if root is None:
                    continue
                if name in GATHERS and position == 0 and flat_out:
                    reads[root].append(flat_out[0].numel())
                else:
                    reads[root].append(_distinct(t))
            if name == "_grouped_mm":
                extra.append(_grouped_mm_flops(args))
            elif func.overloadpacket in flop_registry or name in COPIES or name in GATHERS:
                pass
            elif torch.Tag.pointwise in func.tags or name in REDUCTIONS:
                extra.append(_largest(t.numel() for t in flat_in + flat_out))
            return out

    class Causal(TorchFunctionMode):
        """A causal attention's products need only the pairs its mask keeps (a kernel skips the
        rest: flash attention's causal blocks): the reference's full products less the others."""

        def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
            kwargs = kwargs or {}
            if func is torch.nn.functional.scaled_dot_product_attention:
                causal = kwargs.get("is_causal", args[5] if len(args) > 5 else False)
                if causal:
                    extra.append(-_skipped_by_causal(args[0], args[1], args[2]))
            return func(*args, **kwargs)

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter, Recorder(), Causal():
        result = problem.module.reference(**inputs)
    notes: list[str] = []
    moved: Any = 0
    for name, t in inputs.items():
        if not isinstance(t, torch.Tensor):
            continue
        whole = _distinct(t)
        if not reads[name]:
            notes.append(f"input {name} is never read: counts 0 bytes")
            continue
        most = _largest(reads[name])
        if _hint(most) < _hint(whole):
            notes.append(f"input {name} is read in part: counts the elements read")
        else:
            most = whole
        moved = moved + most * t.dtype.itemsize
    seen: set[int] = set()
    for t in tree_flatten(result)[0]:
        if not isinstance(t, torch.Tensor):
            continue
        if id(t) in roots:
            notes.append("an output is a view of an input: counts 0 bytes")
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        moved = moved + _distinct(t) * t.dtype.itemsize
    flops: Any = counter.get_total_flops()
    for term in extra:
        flops = flops + term
    return moved, flops, notes


def _meta(t: torch.Tensor) -> torch.Tensor:
    """A dense meta tensor of t's shape and dtype. Strides other than 0 do not change what is read
    (a permuted or sliced input is still read whole), and both traces run the same kernels: meta
    ones (a CPU-placed fake tensor takes other paths: scaled_dot_product_attention's CPU flash
    kernel, which FlopCounterMode does not price, where a meta tensor takes the math path)."""
    return torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")


def _broadcast(dense: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """dense with like's dims of stride 0 broadcast (an expanded input reads one slice of them)."""
    zero = [d for d, (size, stride) in enumerate(zip(like.shape, like.stride())) if stride == 0 and size > 1]
    if not zero:
        return dense
    base = dense
    for d in zero:
        base = base.narrow(d, 0, 1)
    return base.expand(dense.shape)


def concrete(problem: Problem, workload: Workload) -> tuple[int, int, list[str]]:
    """(bytes, flops, notes) a concrete trace of the workload counts (fake tensors: no data)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    shaped = fake_inputs(problem, workload)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    inputs: dict[str, Any] = {}
    for name, t in shaped.items():
        inputs[name] = mode.from_tensor(_meta(t)) if isinstance(t, torch.Tensor) else t
    with mode:
        inputs = {n: _broadcast(v, shaped[n]) if isinstance(v, torch.Tensor) else v for n, v in inputs.items()}
        moved, flops, notes = _count(problem, inputs)
    return int(moved), int(flops), notes


def _formula(value: Any, names: dict[Any, str]) -> str:
    """A SymInt or int as formula text over the axis names."""
    import sympy  # type: ignore[import-untyped]

    if not isinstance(value, torch.SymInt):
        return str(int(value))
    shape_env = value.node.shape_env
    expr = sympy.expand(shape_env.replace(value.node.expr))
    unknown = expr.free_symbols - set(names)
    if unknown:
        raise TrafficError(f"sizes {sorted(map(str, unknown))} are not the inputs' axes")
    terms = sympy.Add.make_args(expr)
    text = " + ".join(_print(t, names) for t in terms).replace("+ -1*", "- ")
    check_formula(text)
    return text


def _print(expr: Any, names: dict[Any, str]) -> str:
    """A sympy expression over the size symbols as formula text (+ - * // % ** and numbers)."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

    if isinstance(expr, sympy.Symbol):
        return names[expr]
    if isinstance(expr, sympy.Integer):
        return str(int(expr))
    if isinstance(expr, sympy.Rational):
        return f"({expr.p}/{expr.q})"
    if isinstance(expr, sympy.Add):
        return "(" + " + ".join(_print(a, names) for a in sympy.Add.make_args(expr)) + ")"
    if isinstance(expr, sympy.Mul):
        return "*".join(_print(a, names) for a in sympy.Mul.make_args(expr))
    if isinstance(expr, sympy.Pow) and isinstance(expr.exp, sympy.Integer) and int(expr.exp) > 0:
        base = _print(expr.base, names)
        return (
            f"{base}**{int(expr.exp)}"
            if isinstance(expr.base, (sympy.Symbol, sympy.Integer))
            else f"({base})**{int(expr.exp)}"
        )
    if isinstance(expr, FloorDiv):
        return f"({_operand(expr.args[0], names)} // {_operand(expr.args[1], names)})"
    if isinstance(expr, (Mod, PythonMod)):
        return f"({_operand(expr.args[0], names)} % {_operand(expr.args[1], names)})"
    raise TrafficError(f"{expr} uses {type(expr).__name__}, which the format has not")


def _operand(expr: Any, names: dict[Any, str]) -> str:
    """An operand of // or %: a product in parentheses (sums and quotients print their own)."""
    import sympy

    text = _print(expr, names)
    return (
        f"({text})" if isinstance(expr, (sympy.Mul, sympy.Rational)) and not isinstance(expr, sympy.Integer) else text
    )


def symbolic(problem: Problem, workload: Workload) -> tuple[str, str]:
    """(bytes, flops) formulas of a PyTorch reference, traced with every input size a symbol whose
    hint is this workload's value."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext

    shaped = fake_inputs(problem, workload)
    shape_env = ShapeEnv(duck_shape=False)
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    inputs: dict[str, Any] = {}
    names: dict[Any, str] = {}
    for name, t in shaped.items():
        if not isinstance(t, torch.Tensor):
            inputs[name] = t
            continue
        context: Any = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC] * t.dim())
        inputs[name] = mode.from_tensor(_meta(t), symbolic_context=context)
        for d, size in enumerate(inputs[name].shape):
            axis = f"{name}_{d}"
            if isinstance(size, torch.SymInt) and axis in workload.axes and workload.axes[axis] == _hint(size):
                names[size.node.expr] = axis
    with mode:
        inputs = {n: _broadcast(v, shaped[n]) if isinstance(v, torch.Tensor) else v for n, v in inputs.items()}
        moved, flops, _ = _count(problem, inputs)
    return _formula(moved, names), _formula(flops, names)


# --- the whole problem ------------------------------------------------------------------------------


def _agrees(formula: str, workloads: list[Workload], counts: dict[str, tuple[int, int]], index: int) -> bool:
    for w in workloads:
        names = {**w.axes, "dtype_bytes": w.torch_dtype.itemsize}
        want = counts[w.name][index]
        if not math.isclose(evaluate_formula(formula, names), want, rel_tol=1e-9, abs_tol=0.5):
            return False
    return True


def derive(problem: Problem) -> Derived:
    """The problem's formulas, checked against a concrete trace of every workload."""
    workloads = list(problem.spec.workloads)
    derived = Derived()
    try:
        if problem.spec.provenance.framework == "jax":
            moved, flops, derived.counts = jax_formulas(problem)
            candidates: list[tuple[str, str]] = [(moved, flops)]
        else:
            for w in workloads:
                b, f, notes = concrete(problem, w)
                derived.counts[w.name] = (b, f)
                derived.notes.extend(n for n in notes if n not in derived.notes)
            candidates = []
            errors: list[str] = []
            for w in workloads:  # each workload's sizes as the hints: sizes of 1 specialise
                try:
                    candidates.append(symbolic(problem, w))
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}".splitlines()[0][:200])
            if not candidates:
                raise TrafficError(f"the symbolic trace failed: {errors[0]}")
    except TrafficError as exc:
        derived.reason = str(exc)
        return derived
    except Exception as exc:
        derived.reason = f"the trace failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return derived
    for index in (0, 1):
        for candidate in candidates:
            if _agrees(candidate[index], workloads, derived.counts, index):
                if index == 0:
                    derived.bytes = candidate[0]
                else:
                    derived.flops = candidate[1]
                break
    if derived.flops is None and derived.counts and all(c[1] == 0 for c in derived.counts.values()):
        derived.flops = "0"
    if derived.bytes is None or derived.flops is None:
        missing = " and ".join(n for n, v in (("bytes", derived.bytes), ("flops", derived.flops)) if v is None)
        derived.notes.append(
            f"no {missing} formula evaluates to every workload's count: each workload carries its own traced figure"
        )
    if derived.flops is not None and all(c[1] == 0 for c in derived.counts.values()):
        derived.flops = "0"  # pure data movement: the speed of light and the floor go by bytes alone
        derived.notes.append("no arithmetic: flops 0")
    return derived


def derive_all(
    problems: Iterable[Problem], on_each: Callable[[Problem, Derived], None] | None = None
) -> dict[str, Derived]:
    """derive() over problems, by problem id."""
    out: dict[str, Derived] = {}
    for problem in problems:
        out[problem.id] = derive(problem)
        if on_each is not None:
            on_each(problem, out[problem.id])
    return out


def with_formulas(spec: dict[str, Any], folder: Path) -> dict[str, Any]:
    """`spec` (the problem.toml in `folder`, as a dict) with its bytes and FLOPs derived again
    over its workloads as they now are, or without them where they cannot be: formulas written
    for other shapes (a representative's, before a merge joined other models' shapes; a problem
    before assembly added a workload) may hold sizes that were fixed for those."""
    derived = derive(load_problem(folder))
    spec = {key: value for key, value in spec.items() if key not in ("bytes", "flops")}
    if not derived.complete:
        return spec
    spec.update({key: formula for key, formula in (("bytes", derived.bytes), ("flops", derived.flops)) if formula})
    own = derived.workload_figures()
    spec["workloads"] = [
        {**{k: v for k, v in w.items() if k not in ("bytes", "flops")}, **own.get(w["name"], {})}
        for w in spec.get("workloads", [])
    ]
    return spec
