"""What computation a problem is, whatever it is named and whichever model it came from (issue 48).

Two keys per problem:
- the **exact key**: the reference's graph on each workload's inputs, with every tensor's shape,
  dtype and strides: equal keys are the same computation on the same shapes (Llama's and
  Mistral's RMSNorm + residual at 2048 x 4096);
- the **family key**: the same graph with the shapes left out (a tensor is its dtype, rank and
  stride order) and the integer arguments that change with the workload's sizes (a view's sizes,
  a slice's end) abstracted: equal keys are one computation on other shapes, so the shapes can be
  workloads of one problem.

A graph is the reference's aten calls in order (views included: they wire the graph), each
argument a tensor named by where it came from (the k-th input the graph reads, or an earlier
call's result) or its value; the inputs' own names do not count. The references run on fake
tensors (no data). A JAX reference is keyed from its source instead (`jax_identity`): its
equations, their parameters and its inputs' shapes, never by running it in this process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpuarena.dataset.keys import Call, Identity, Leaf, Trace, digest
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload

ABSTRACT = "?"


@dataclass
class Traced:
    """A workload's trace and the inputs' names in the order the graph first reads them."""

    trace: Trace
    order: list[str]


def _value(value: Any) -> Leaf:
    if isinstance(value, bool):
        return ("V", repr(value))
    if isinstance(value, int):
        return ("I", value)
    if isinstance(value, torch.device):
        return ("V", "device")  # where it runs is not what it computes
    if isinstance(value, float):
        return ("V", repr(value))
    return ("V", str(value))


class _Graph(TorchDispatchMode):
    """Records the aten calls with each tensor argument's origin."""

    def __init__(self, inputs: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.names = {id(t): name for name, t in inputs.items() if isinstance(t, torch.Tensor)}
        self.labels: dict[int, str] = {}
        self.order: list[str] = []
        self.calls: list[Call] = []
        self.alive: list[Any] = list(inputs.values())  # ids stay unique while the trace lives

    def label(self, tensor: torch.Tensor) -> str:
        key = id(tensor)
        if key not in self.labels:
            if key in self.names:
                self.labels[key] = f"in{len(self.order)}"
                self.order.append(self.names[key])
            else:  # made outside the graph (a constant of the module)
                self.labels[key] = f"c{len(self.labels)}"
            self.alive.append(tensor)
        return self.labels[key]

    def leaf(self, value: Any) -> Leaf:
        if isinstance(value, torch.Tensor):
            dtype = str(value.dtype).removeprefix("torch.")
            return ("T", self.label(value), dtype, tuple(value.shape), tuple(value.stride()))
        return _value(value)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        flat, _ = tree_flatten((args, kwargs or {}))
        leaves = tuple(self.leaf(v) for v in flat)
        result = func(*args, **(kwargs or {}))
        index = len(self.calls)
        self.calls.append((str(func).removeprefix("aten."), leaves))
        outs, _ = tree_flatten(result)
        for position, out in enumerate(o for o in outs if isinstance(o, torch.Tensor)):
            self.labels[id(out)] = f"t{index}.{position}"
            self.alive.append(out)
        return result


def _inputs(problem: Problem, workload: Workload) -> dict[str, Any]:
    generator = torch.Generator(device="cpu").manual_seed(0)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)


def _run(problem: Problem, workload: Workload) -> Traced:
    inputs = _inputs(problem, workload)
    recorder = _Graph({k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)})
    with torch.no_grad(), recorder:
        result = problem.reference(**inputs)
    outs, _ = tree_flatten(result)
    returned = tuple(recorder.label(o) for o in outs if isinstance(o, torch.Tensor))
    unused = [n for n in problem.input_names if n not in recorder.order]
    return Traced((tuple(recorder.calls), returned), recorder.order + unused)


def trace(problem: Problem, workload: Workload) -> Traced | None:
    """The workload's graph on fake tensors; for real where the reference needs values (a CPU
    workload only); None where neither runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    quiet = logging.getLogger("torch._subclasses.fake_tensor")  # it logs each failure at ERROR
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return _run(problem, workload)
    except Exception:
        if "cpu" not in workload.devices:
            return None
    finally:
        quiet.setLevel(level)
    try:
        return _run(problem, workload)
    except Exception:
        return None


def _skeleton(traced: Trace) -> tuple[Any, ...]:
    """The trace without integers and tensor shapes: traces of one reference on other sizes match."""
    calls, returned = traced
    return (
        tuple(
            (op, tuple(leaf[:3] + (len(leaf[3]),) if leaf[0] == "T" else leaf[:1] for leaf in leaves))
            for op, leaves in calls
        ),
        returned,
    )


def _stride_order(shape: tuple[int, ...], stride: tuple[int, ...]) -> tuple[Any, ...]:
    """A tensor's layout without its sizes: the order of its dimensions in memory, and whether any
    is broadcast (stride 0) or skips memory (a slice of a larger storage)."""
    order = tuple(sorted(range(len(stride)), key=lambda d: (-stride[d], d)))
    dense, expected = True, 1
    for d in reversed(order):
        if shape[d] != 1 and stride[d] != expected:
            dense = False
        expected *= shape[d]
    return order, dense


def family_of(traces: list[Trace]) -> tuple[Any, ...]:
    """The family key of a problem's traces: integers that differ between workloads are sizes."""
    first = traces[0]
    alike = [t for t in traces if _skeleton(t) == _skeleton(first)]
    calls = []
    for i, (op, leaves) in enumerate(first[0]):
        abstract: list[tuple[Any, ...]] = []
        for j, leaf in enumerate(leaves):
            if leaf[0] == "T":
                abstract.append(("T", leaf[1], leaf[2], len(leaf[3]), _stride_order(leaf[3], leaf[4])))
            elif leaf[0] == "I" and any(t[0][i][1][j] != leaf for t in alike):
                abstract.append(("I", ABSTRACT))
            else:
                abstract.append(leaf)
        calls.append((op, tuple(abstract)))
    return tuple(calls), first[1]


def torch_identity(problem: Problem) -> Identity:
    """A PyTorch problem's keys from its reference's graph on every workload."""
    traced: dict[str, Trace] = {}
    order: list[str] = []
    for workload in problem.spec.workloads:
        found = trace(problem, workload)
        if found is not None:
            traced[workload.name] = found.trace
            order = order or found.order
    spec = problem.spec
    if not traced:
        name = f"untraced:{problem.id}"  # nothing to compare: its own computation
        return Identity(problem.id, spec.level, "pytorch", name, name, error="the reference ran on no workload")
    dtypes = sorted({w.dtype for w in spec.workloads})
    exact = digest(sorted({repr(t) for t in traced.values()}))
    family = digest((family_of(list(traced.values())), dtypes))
    return Identity(problem.id, spec.level, "pytorch", exact, family, order, traced)


def identity(problem: Problem) -> Identity:
    """A problem's keys: a JAX reference from its source, any other from its graph."""
    if problem.spec.provenance.framework == "jax":
        from gpuarena.dataset.jax_identity import jax_identity

        return jax_identity(problem)
    return torch_identity(problem)
