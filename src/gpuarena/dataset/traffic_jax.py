"""Bytes and FLOPs of a JAX reference (traffic.py does PyTorch's and says how each op is
priced): its jaxpr traced on each workload's shapes, and each term's sizes matched back to the
axes, so that the formulas hold for every workload."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from gpuarena.dataset.traffic_base import TrafficError, fake_inputs
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload, check_formula

JAX_MOVES = frozenset(
    {
        "reshape",
        "broadcast_in_dim",
        "transpose",
        "squeeze",
        "expand_dims",
        "convert_element_type",
        "copy",
        "copy_p",
        "slice",
        "dynamic_slice",
        "gather",
        "concatenate",
        "split",
        "stack",
        "pad",
        "rev",
        "iota",
        "select_and_gather_add",
        "sort",
        "top_k",
        "dynamic_update_slice",
        "scatter",
        "device_put",
        "stop_gradient",
        "optimization_barrier",
    }
)
"""JAX primitives that move data: no FLOPs."""
JAX_VIEWS = frozenset(
    {"reshape", "broadcast_in_dim", "transpose", "squeeze", "expand_dims", "rev", "copy", "copy_p", "stop_gradient"}
)
"""JAX primitives a fused kernel reads its operand through: the operand's elements, not the result's."""
JAX_NARROW = frozenset({"slice", "dynamic_slice", "gather", "split"})
"""JAX primitives that read only part of their first operand: the elements they produce."""


# --- the trace -------------------------------------------------------------------------------------------


@dataclass
class _Term:
    """coefficient * product of sizes; a size is (the axis it is, where known, or None, its value)."""

    coefficient: int
    sizes: list[tuple[str | None, int]]


def _jax_terms(problem: Problem, workload: Workload) -> tuple[list[_Term], list[_Term]]:
    """(byte terms, flop terms) of a JAX reference traced on the workload's shapes."""
    from gpuarena.dataset.jax_trace import BODY_PARAMS, INLINED
    from gpuarena.jax_bridge import start

    start(torch.device("cpu"))
    import jax

    shaped = fake_inputs(problem, workload)
    names = [n for n, v in shaped.items() if isinstance(v, torch.Tensor)]
    structs = [jax.ShapeDtypeStruct(tuple(shaped[n].shape), str(shaped[n].dtype).removeprefix("torch.")) for n in names]

    def call(*arrays: Any) -> Any:
        return problem.module.reference(**{**shaped, **dict(zip(names, arrays))})

    closed = jax.make_jaxpr(call)(*structs)
    axis_sizes = {
        n: [(f"{n}_{d}" if f"{n}_{d}" in workload.axes else None, int(s)) for d, s in enumerate(shaped[n].shape)]
        for n in names
    }
    root: dict[Any, str] = {}  # a jaxpr var -> the input it is a view of
    reads: dict[str, list[list[tuple[str | None, int]]]] = {n: [] for n in names}
    flops: list[_Term] = []

    def sizes(var: Any) -> list[tuple[str | None, int]]:
        return [(None, int(s)) for s in var.aval.shape]

    def walk(jaxpr: Any) -> None:
        for eqn in jaxpr.eqns:
            prim = eqn.primitive.name
            body = next((eqn.params[k] for k in BODY_PARAMS if k in eqn.params), None)
            if prim in INLINED and body is not None:
                inner = body.jaxpr if hasattr(body, "jaxpr") else body
                for outer, var in zip(eqn.invars, inner.invars):
                    if not hasattr(outer, "val") and outer in root:
                        root[var] = root[outer]
                walk(inner)
                for var, outer in zip(inner.outvars, eqn.outvars):
                    if var in root:
                        root[outer] = root[var]
                continue
            ins = [v for v in eqn.invars if hasattr(v, "aval") and not hasattr(v, "val")]
            for position, var in enumerate(ins):
                if var not in root:
                    continue
                if prim in JAX_VIEWS:
                    for out in eqn.outvars:
                        root[out] = root[var]
                elif prim in JAX_NARROW and position == 0 and len(eqn.outvars) == 1:
                    reads[root[var]].append(sizes(eqn.outvars[0]))
                else:  # read whole, through whatever view of it
                    reads[root[var]].append(axis_sizes[root[var]])
            if prim == "dot_general":
                (contract, _), _ = eqn.params["dimension_numbers"]
                lhs = eqn.invars[0].aval.shape
                flops.append(_Term(2, sizes(eqn.outvars[0]) + [(None, int(lhs[d])) for d in contract]))
            elif prim == "conv_general_dilated":
                rhs = eqn.invars[1].aval.shape
                kernel = math.prod(int(s) for s in rhs) // int(rhs[0])
                flops.append(_Term(2 * kernel, sizes(eqn.outvars[0])))
            elif prim not in JAX_MOVES:
                tensors = [v for v in [*ins, *eqn.outvars] if hasattr(v, "aval")]
                if tensors:
                    big = max(tensors, key=lambda v: math.prod(int(s) for s in v.aval.shape))
                    flops.append(_Term(1, sizes(big)))

    for var, name in zip(closed.jaxpr.invars, names):
        root[var] = name
    walk(closed.jaxpr)
    moved: list[_Term] = []
    for name in names:
        itemsize = shaped[name].dtype.itemsize
        whole = axis_sizes[name]
        if not reads[name]:
            continue
        most = max(reads[name], key=lambda s: math.prod(v for _, v in s))
        if math.prod(v for _, v in most) >= math.prod(v for _, v in whole):
            most = whole
        moved.append(_Term(itemsize, most))
    outs = closed.jaxpr.outvars
    for var in outs:
        if hasattr(var, "aval") and not hasattr(var, "val") and var not in root:
            moved.append(_Term(var.aval.dtype.itemsize, sizes(var)))
    return moved, flops


def _match(terms_by_workload: list[list[_Term]], workloads: list[Workload]) -> str:
    """One formula for terms traced per workload: each size becomes the axis it came from, or an
    axis whose value it equals in every workload, or a number the same in every workload."""
    lengths = {len(t) for t in terms_by_workload}
    if len(lengths) != 1:
        raise TrafficError("the workloads trace to different programs")
    combined: dict[str, int] = {}  # like terms summed: "x_0*x_1" -> coefficient
    for terms in zip(*terms_by_workload):
        if len({t.coefficient for t in terms}) != 1 or len({len(t.sizes) for t in terms}) != 1:
            raise TrafficError("the workloads trace to different programs")
        factors: list[str] = []
        coefficient = terms[0].coefficient
        for column in zip(*(t.sizes for t in terms)):
            values = [v for _, v in column]
            axis = column[0][0]
            if all(v == 1 for v in values):
                continue
            if axis is not None and all(w.axes.get(axis) == v for w, v in zip(workloads, values)):
                factors.append(axis)
                continue
            found = next(
                (a for a in workloads[0].axes if all(w.axes.get(a) == v for w, v in zip(workloads, values))), None
            )
            if found is not None:
                factors.append(found)
            elif len(set(values)) == 1:
                coefficient *= values[0]
            elif (part := _part_of_axis(workloads, values)) is not None:
                factors.append(part)  # a head's half (a rotary split): an axis over k in every workload
            else:
                raise TrafficError(f"a size ({values}) is neither an axis nor the same in every workload")
        key = "*".join(sorted(factors))
        combined[key] = combined.get(key, 0) + coefficient
    parts = [f"{c}*{k}" if k and c != 1 else (k or str(c)) for k, c in sorted(combined.items()) if c]
    text = " + ".join(parts) if parts else "0"
    check_formula(text)
    return text


def _part_of_axis(workloads: list[Workload], values: list[int]) -> str | None:
    """`(axis/k)` where the size is that axis divided by one integer k in every workload (a JAX
    reference's sizes scale with its axes: dataset/jax_sizes.py), the smallest such k (a head's
    half is its head's, not the tokens' over 32), else None."""
    parts = []
    for axis in workloads[0].axes:
        sizes = [w.axes.get(axis) or 0 for w in workloads]
        ks = {s // v if v and s % v == 0 else 0 for s, v in zip(sizes, values)}
        if len(ks) == 1 and (k := ks.pop()) > 1:
            parts.append((k, axis))
    return f"({min(parts)[1]}/{min(parts)[0]})" if parts else None


def jax_formulas(problem: Problem) -> tuple[str, str, dict[str, tuple[int, int]]]:
    workloads = list(problem.spec.workloads)
    traced = [_jax_terms(problem, w) for w in workloads]

    def total(terms: list[_Term]) -> int:
        return sum(t.coefficient * math.prod(v for _, v in t.sizes) for t in terms)

    counts = {w.name: (total(b), total(f)) for w, (b, f) in zip(workloads, traced)}
    return _match([b for b, _ in traced], workloads), _match([f for _, f in traced], workloads), counts
