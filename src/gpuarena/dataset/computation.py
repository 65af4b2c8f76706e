"""What a reference computes, however it is spelled: the canonical fingerprint a sample's
duplicate check compares (dataset/fingerprint.py's `canonical=True`).

The reference is traced on fake tensors (`make_fx`) with every decomposition torch registers
(`torch._decomp.decomposition_table`), which takes it down to PyTorch's primitives: module
and functional forms, composite ops and their hand-written decompositions meet there
(`F.rms_norm(x, (h,), w)` and `x * rsqrt(mean(x*x) + eps) * w` both become mul, sum, div, add,
rsqrt, mul, mul; `x.pow(2)` is `x * x`; `F.softmax` and `exp(x - amax) / sum` are the same calls).
Then:

- views are left out (reshape, squeeze, broadcast_in_dim, collapse and split of dims), and so
  are copies (an in-place op's write-back, `clone`), and arithmetic by a constant that changes
  nothing (`* 1`, `+ 0`, what `addmm`'s alpha and beta leave);
- leading batch dims that every op only carries through are merged into one: a norm over the
  last dim of [B, S, H] is the same computation as over [B*S, H]. Dims are merged only where
  each call either passes them through untouched (pointwise ops on equal shapes, reductions and
  dim ops over later dims, broadcasts that do not split them, views that keep or exactly merge
  them) or does not hold them at all (a weight of [H]);
- a call's key is its primitive, its tensors' (shape, dtype) after the merge, and its other
  arguments but floating constants (dims, exponents and dtypes stay; an eps does not).

Limits: a call multiset, not a data-flow graph (two programs with the same calls wired apart
are the same key); float constants are ignored (RMSNorm with eps 1e-5 and 1e-6 is one
computation, and so are `x * 0.5` and `x * 2`); copies count for nothing; a computation split
into a Python loop over pieces stays apart from its vectorised form; ops with no
decomposition (mm, convolution, native_layer_norm's primitives, var) meet only their own kind.
Different computations stay apart: LayerNorm and RMSNorm run different calls, a softmax over
another dim reduces another dim.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten

Call = tuple[str, tuple[tuple[tuple[int, ...], str], ...], tuple[Any, ...]]
"""One call: its primitive, its tensors' (shape, dtype) after the batch merge, its other arguments."""

VIEWS = frozenset(
    {
        "broadcast_in_dim",
        "collapse_view",
        "collapse",
        "split_dim",
        "reshape",
        "view",
        "_unsafe_view",
        "view_of",
        "squeeze",
        "unsqueeze",
        "expand_dims",
        "expand",
        "alias",
        "detach",
        "lift_fresh",
        "lift_fresh_copy",
        "clone",
        "copy_",
        "copy",
        "copy_to",
    }
)
"""Calls that only change how elements are addressed, or copy them: left out of the key."""
RESHAPES = frozenset({"collapse_view", "collapse", "split_dim", "reshape", "view", "_unsafe_view", "view_of"})
DIM_ARGS = frozenset({"dim", "dims", "reduction_dims", "axis", "dimension", "dimensions"})
IDENTITY = {"mul": 1, "div": 1, "true_divide": 1, "add": 0, "sub": 0}
"""Pointwise ops whose scalar argument of this value changes nothing."""


def _name(target: Any) -> str:
    return str(target._schema.name.split("::")[-1]) if hasattr(target, "_schema") else str(target)


def _shape(value: Any) -> tuple[int, ...] | None:
    return tuple(int(s) for s in value.shape) if isinstance(value, torch.Tensor) else None


class _Node:
    """One call of the traced graph: its op's name, arguments (tensors by their value) and outputs."""

    def __init__(self, node: Any) -> None:
        self.name = _name(node.target)
        schema = getattr(node.target, "_schema", None)
        names = [a.name for a in schema.arguments] if schema is not None else []
        self.args: list[tuple[str, Any]] = []
        for k, arg in enumerate(node.args):
            self.args.append((names[k] if k < len(names) else str(k), _value(arg)))
        self.args += [(key, _value(arg)) for key, arg in node.kwargs.items()]
        outs, _ = tree_flatten(node.meta.get("val"))
        self.outputs = [o for o in outs if isinstance(o, torch.Tensor)]
        self.node = node
        found, _ = tree_flatten([*node.args, *node.kwargs.values()])
        self.sources = [a for a in found if isinstance(getattr(a, "meta", {}).get("val"), torch.Tensor)]
        """The graph nodes its tensor arguments come from, in the order of its tensor arguments."""

    @property
    def tensors(self) -> list[torch.Tensor]:
        found, _ = tree_flatten([v for _, v in self.args])
        return [t for t in found if isinstance(t, torch.Tensor)] + self.outputs

    def dims(self) -> list[int] | None:
        """The dims its dim-like arguments name, made positive by its first tensor's rank."""
        first = next((t for t in self.tensors if isinstance(t, torch.Tensor)), None)
        rank = first.dim() if first is not None else 0
        found = []
        for key, value in self.args:
            if key in DIM_ARGS and value is not None:
                for d in value if isinstance(value, (list, tuple)) else [value]:
                    if isinstance(d, int):
                        found.append(d % rank if rank else d)
        return found if any(k in DIM_ARGS for k, _ in self.args) else None


def _value(arg: Any) -> Any:
    if hasattr(arg, "meta") and "val" in arg.meta:
        return arg.meta["val"]
    if isinstance(arg, (list, tuple)):
        return type(arg)(_value(a) for a in arg)
    return arg


def _nodes(graph: Any) -> list[_Node]:
    return [_Node(n) for n in graph.nodes if n.op == "call_function"]


def _in(shape: tuple[int, ...] | None, prefix: tuple[int, ...]) -> bool:
    return shape is not None and len(shape) >= len(prefix) and shape[: len(prefix)] == prefix


def _merged(shape: tuple[int, ...], prefix: tuple[int, ...]) -> tuple[int, ...]:
    return (math.prod(prefix), *shape[len(prefix) :]) if prefix and _in(shape, prefix) else shape


def _keeps(node: _Node, prefix: tuple[int, ...]) -> bool:
    """Whether the call passes the batch dims `prefix` through untouched (or does not hold them)."""
    j = len(prefix)
    shapes = [_shape(t) for t in node.tensors]
    holding = [s for s in shapes if _in(s, prefix)]
    if not holding:
        return True
    if node.name == "broadcast_in_dim":
        operand, out = shapes[0], _shape(node.outputs[0]) if node.outputs else None
        mapped = list(dict(node.args).get("broadcast_dimensions") or [])
        if not _in(out, prefix) or operand is None:
            return False
        if _in(operand, prefix):
            return mapped[:j] == list(range(j))
        return all(d >= j for d in mapped)
    if node.name in RESHAPES:
        operand, out = shapes[0], _shape(node.outputs[0]) if node.outputs else None
        if operand is None or out is None:
            return False
        if _in(operand, prefix) and _in(out, prefix):
            return True
        return _merged(operand, prefix) == _merged(out, prefix)
    if any(s is not None and not _in(s, prefix) and len(s) >= j for s in shapes):
        return False  # a tensor holding some of those dims but not as the batch
    dims = node.dims()
    if dims is not None:
        return all(d >= j for d in dims)
    return len(set(shapes)) == 1  # a pointwise op on equal shapes


def _prefix(nodes: list[_Node], inputs: Sequence[torch.Tensor]) -> tuple[int, ...]:
    """The longest run of leading dims of an input that every call passes through, or ()."""
    candidates = {tuple(t.shape[:j]) for t in inputs for j in range(2, t.dim())}
    for prefix in sorted(candidates, key=lambda p: (len(p), p), reverse=True):
        if all(_keeps(n, prefix) for n in nodes):
            return tuple(int(s) for s in prefix)
    return ()


def _scalar(value: Any) -> Any:
    """A non-tensor argument as it enters the key: floats left out, the rest as text or ints."""
    if isinstance(value, bool) or isinstance(value, int) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return "float"
    if isinstance(value, (list, tuple)):
        return tuple(_scalar(v) for v in value)
    return str(value)


def _identity(node: _Node) -> bool:
    """`x * 1`, `x / 1`, `x + 0`, `x - 0` (and `1 * x`, `0 + x`): a call that changes nothing."""
    name = node.name.rstrip("_")
    values = [v for _, v in node.args[:2]]
    if name not in IDENTITY or len(values) != 2 or (len(node.args) > 2 and name in ("add", "sub")):
        return False  # add and sub with an alpha are left in
    order = [values] if name in ("div", "true_divide", "sub") else [values, values[::-1]]
    return any(
        isinstance(a, torch.Tensor)
        and isinstance(b, (int, float))
        and not isinstance(b, bool)
        and b == IDENTITY[name]
        and (a.is_floating_point() or isinstance(b, int))  # an int tensor times 1.0 is a cast
        for a, b in order
    )


def _key(node: _Node, prefix: tuple[int, ...], roots: dict[Any, Any]) -> Call:
    """The call's key: its tensors are those its arguments are views of (a broadcast weight is
    its [H], not the [B, S, H] it was broadcast to), with which of them are the same value."""
    j = len(prefix)
    holding = any(_in(_shape(t), prefix) for t in node.tensors) if j else False
    tensors: list[tuple[tuple[int, ...], str]] = []
    others: list[Any] = []
    sources = [roots.get(s, s) for s in node.sources]
    others.append(("same", tuple(sources.index(s) for s in sources)))
    for key, value in node.args:
        flat, _ = tree_flatten(value)
        if flat and all(isinstance(v, torch.Tensor) for v in flat):
            for v in flat:
                root = sources.pop(0).meta["val"] if sources else v
                tensors.append((_merged(_shape(root) or (), prefix), str(v.dtype).removeprefix("torch.")))
        elif key in DIM_ARGS and holding:
            dims = node.dims() or []
            others.append((key, tuple(d - j + 1 for d in dims)))
        elif key in DIM_ARGS:
            others.append((key, tuple(node.dims() or [])))
        else:
            others.append((key, _scalar(value)))
    return (node.name.rstrip("_"), tuple(tensors), tuple(others))


def trace(function: Callable[..., Any], inputs: dict[str, Any], fake: bool = True, core: bool = False) -> Any:
    """The function's graph at the inputs' shapes, decomposed to primitives (fake: no data);
    core: only to PyTorch's core aten ops instead, which all run as native kernels (a graph to
    replay and time: primitives run eagerly through Python references, far slower)."""
    from torch._decomp import core_aten_decompositions, decomposition_table
    from torch.fx.experimental.proxy_tensor import make_fx

    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]

    def call(*tensors: torch.Tensor) -> Any:
        return function(**{**inputs, **dict(zip(names, tensors))})

    table: dict[Any, Callable[..., Any]] = dict(core_aten_decompositions() if core else decomposition_table)
    with torch.no_grad():
        return make_fx(call, decomposition_table=table, tracing_mode="fake" if fake else "real")(
            *(inputs[k] for k in names)
        )


def canonical_calls(graph: Any, inputs: Sequence[torch.Tensor]) -> tuple[tuple[Call, int], ...]:
    """The graph's calls as the sorted multiset that is its canonical fingerprint."""
    nodes = _nodes(graph.graph)
    prefix = _prefix(nodes, inputs)
    counted: Counter[Call] = Counter()
    roots: dict[Any, Any] = {}
    for node in nodes:
        if node.name in VIEWS or _identity(node):
            if node.sources:
                roots[node.node] = roots.get(node.sources[0], node.sources[0])
            continue
        counted[_key(node, prefix, roots)] += 1
    return tuple(sorted(counted.items(), key=repr))
