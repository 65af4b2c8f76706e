"""A sample's recorded score: its optimised kernel's speed-up over the **canonical reference**,
never over the contributor's reference alone (issue 48: a deliberately slow reference scored a
190x speed-up, and ccf-dataset breaks ties on the score).

For each workload the check times, on its device and in one process, three ways to compute the
sample's problem on the same inputs:

- the contributor's reference, as written;
- its canonical graph: the reference traced to PyTorch's primitives (dataset/computation.py) with
  dead work left out (a result nobody reads) and repeated work done once (the same op on the
  same values), replayed eagerly: a reference that loops to waste time loses the waste;
- the dataset's reference for the same computation, where a dataset problem's workload has the
  workload's canonical fingerprint (the duplicate check's match).

The fastest of them is the canonical reference; the workload's factor is its time over the
contributor's times a slack of 1.5 for noise, at most 1, and the recorded score is the
optimised kernel's speed-up (the harness's, over the contributor's reference) times the
factors' weighted geometric mean. So a slow reference lowers the factor by what it wastes and
the score stays what the kernel earns over an honest reference (within the slack); a reference
as fast as its canonical graph keeps the harness's score.

Where there is none the sample gets no score, and the report says why: work split into many
small pieces (a Python loop over rows) replays piece by piece, as slowly as it runs, so such a
graph is no canonical reference (PIECES), and a graph that cannot be replayed is none either.
The times are the fastest of a few calls in the check's process, not the harness's statistics:
they scale the harness's score, they do not replace it.
"""

from __future__ import annotations

import functools
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel
from torch.utils._pytree import tree_flatten

from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload

PIECES = 16
"""A graph that runs one call this often on same-shaped tensors is work split into pieces (a
Python loop over rows, heads or layers): replayed, it is as slow as the reference, so it is no
canonical reference, and without the dataset's reference such a sample gets no score."""
PIECE_OPS = frozenset({"select", "slice", "index", "unbind", "split", "split_with_sizes", "stack", "cat"})
"""Calls that cut the data into pieces or put it together: not counted as the repeated work."""
SLACK = 1.5
"""A reference up to this much slower than its canonical form loses nothing: two timings of the
same work differ by noise, and a graph's replay skips Python's work between calls."""
REPEATS = 15
MAX_SECONDS = 1.0
"""Per workload and side: a reference slower than this is timed fewer times."""


class WorkloadFloor(BaseModel):
    """One workload's three times (seconds, the fastest of a few calls) and where the canonical one came from."""

    workload: str
    reference_s: float
    graph_s: float | None = None
    dataset_s: float | None = None
    dataset: str = ""
    """The dataset problem and workload timed (problem:workload), when one matched."""
    pieces: int = 0
    """How often the canonical graph's most repeated call runs (PIECES or more: a loop)."""
    factor: float
    """The canonical reference's time over the contributor's, at most 1."""
    canonical: bool
    """Whether there was a canonical reference to time (the graph or the dataset's)."""


class CanonicalScore(BaseModel):
    """The sample's score against its canonical reference, and how it was found."""

    score: float | None
    basis: str
    """What the score is over: the canonical graph, a dataset problem, or why there is none."""
    reference_slowdown: float | None = None
    """How many times slower the contributor's reference ran than the canonical one."""
    workloads: list[WorkloadFloor] = []


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fastest_seconds(call: Callable[[], Any], device: torch.device) -> float:
    """The fastest of a few timed calls after one warm-up call: each side's time as little
    disturbed by the machine's other work as it gets, so the ratio is the work's. On the CPU on
    one thread, as the harness times (a busy machine stalls a thread pool's barriers)."""
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        return _fastest(call, device)
    finally:
        torch.set_num_threads(threads)


def _fastest(call: Callable[[], Any], device: torch.device) -> float:
    with torch.no_grad():
        call()
        _sync(device)
        times: list[float] = []
        spent = 0.0
        while len(times) < REPEATS and spent < MAX_SECONDS:
            start = time.perf_counter()
            call()
            _sync(device)
            times.append(time.perf_counter() - start)
            spent += times[-1]
    return min(times)


def _inputs(problem: Problem, workload: Workload, device: torch.device, seed: int = 0) -> dict[str, Any]:
    generator = torch.Generator(device=device).manual_seed(seed)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, device, generator)


def _same(a: Any, b: Any) -> bool:
    """Whether two results agree (floating tensors to a loose tolerance: the graph rounds as
    decomposed ops do)."""
    left, _ = tree_flatten(a)
    right, _ = tree_flatten(b)
    if len(left) != len(right):
        return False
    for x, y in zip(left, right):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if not isinstance(x, torch.Tensor):
            continue
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            if not torch.allclose(x.double(), y.double(), rtol=1e-2, atol=1e-2, equal_nan=True):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def _lean(graph: Any) -> Any:
    """The graph with dead work left out and identical pure calls made once (common
    subexpressions): nothing random and nothing that writes is merged."""
    seen: dict[Any, Any] = {}
    for node in list(graph.graph.nodes):
        if node.op != "call_function":
            continue
        schema = getattr(node.target, "_schema", None)
        tags = getattr(node.target, "tags", ())
        if schema is None or schema.is_mutable or torch.Tag.nondeterministic_seeded in tags:
            continue
        try:
            key = (node.target, repr(node.args), repr(sorted(node.kwargs.items())))
        except Exception:
            continue
        if key in seen:
            node.replace_all_uses_with(seen[key])
        else:
            seen[key] = node
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return graph


def pieces(graph: Any) -> int:
    """How many times the graph's most repeated call runs: the same op on tensors of the same
    shapes, once repeated work is done once, is the same work on other pieces of the data."""
    from gpuarena.dataset.computation import VIEWS, _name

    counted: Counter[tuple[Any, ...]] = Counter()
    for node in graph.graph.nodes:
        if node.op != "call_function" or _name(node.target) in VIEWS or _name(node.target) in PIECE_OPS:
            continue
        shapes = tuple(
            tuple(a.meta["val"].shape) for a in node.args if isinstance(getattr(a, "meta", {}).get("val"), torch.Tensor)
        )
        if shapes:
            counted[(node.target, shapes)] += 1
    return max(counted.values(), default=0)


def _is_jax(problem: Problem) -> bool:
    return problem.spec.provenance.framework == "jax"


def _jitted(problem: Problem, inputs: dict[str, Any]) -> Callable[..., Any]:
    """A JAX reference's canonical form: jitted whole, so XLA leaves dead work out, does
    repeated work once and fuses a loop's pieces (tensors in by position, as a graph takes them)."""
    import jax

    from gpuarena.jax_bridge import torch_facing

    names = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
    rest = {k: v for k, v in inputs.items() if k not in names}
    jitted = torch_facing(jax.jit(functools.partial(problem.module.reference, **rest)))
    return lambda *tensors: jitted(**dict(zip(names, tensors)))


def _graph(
    problem: Problem, workload: Workload, inputs: dict[str, Any], device: torch.device
) -> tuple[float | None, int]:
    """The canonical graph's time, where the graph computes what the reference does, and how
    often its most repeated call runs. The graph is checked on other inputs first, so a graph
    that only recorded a result (a reference whose work PyTorch did not see: JAX, NumPy, an
    extension) is never the floor."""
    from gpuarena.dataset.computation import trace

    if problem.spec.provenance.framework not in ("pytorch", "jax"):
        return None, 0
    try:
        graph = (
            _lean(trace(problem.reference, inputs, fake=False, core=True))
            if not _is_jax(problem)
            else _jitted(problem, inputs)
        )
        other = _inputs(problem, workload, device, seed=1)
        with torch.no_grad():
            replayed = graph(*(v for v in other.values() if isinstance(v, torch.Tensor)))
            if not _same(replayed, problem.reference(**other)):
                return None, 0
        tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
        return fastest_seconds(lambda: graph(*tensors), device), 0 if _is_jax(problem) else pieces(graph)
    except Exception:
        return None, 0  # the graph cannot be replayed (a reference that reads values): no floor from it


def _dataset_seconds(match: tuple[str, Path, str] | None, device: torch.device) -> float | None:
    from gpuarena.problems.loader import load_problem

    if match is None:
        return None
    try:
        problem = load_problem(match[1])
        workload = next(w for w in problem.spec.workloads if w.name == match[2])
        inputs = _inputs(problem, workload, device)
        return fastest_seconds(lambda: problem.reference(**inputs), device)
    except Exception:
        return None


def canonical_score(
    problem: Problem,
    device: str,
    speedup: float | None,
    matched: dict[str, tuple[str, Path, str]],
) -> CanonicalScore:
    """The sample's score against its canonical reference. `speedup`: the optimised kernel's
    score from the harness; `matched`: the sample's workloads that a dataset problem's workload
    computes, each to that problem's id, folder and workload."""
    if speedup is None:
        return CanonicalScore(score=None, basis="no score: the optimised kernel did not pass")
    where = torch.device(device)
    floors: list[WorkloadFloor] = []
    weights: list[float] = []
    for workload in problem.spec.workloads:
        if where.type not in workload.devices:
            continue
        inputs = _inputs(problem, workload, where)
        reference_s = fastest_seconds(lambda: problem.reference(**inputs), where)
        graph_s, repeats = _graph(problem, workload, inputs, where)
        dataset_s = _dataset_seconds(matched.get(workload.name), where)
        canonical = [t for t in (graph_s if repeats < PIECES else None, dataset_s) if t is not None]
        match = matched.get(workload.name)
        floors.append(
            WorkloadFloor(
                workload=workload.name,
                reference_s=reference_s,
                graph_s=graph_s,
                pieces=repeats,
                dataset_s=dataset_s,
                dataset=f"{match[0]}:{match[2]}" if match and dataset_s is not None else "",
                factor=min(1.0, SLACK * min(canonical) / reference_s) if canonical and reference_s > 0 else 1.0,
                canonical=bool(canonical),
            )
        )
        weights.append(workload.weight)
    return _scored(floors, weights, speedup, where)


def _scored(floors: list[WorkloadFloor], weights: list[float], speedup: float, where: torch.device) -> CanonicalScore:
    from gpuarena.harness.stats import weighted_geomean

    if not floors:
        return CanonicalScore(score=None, basis=f"no score: no workload runs on {where.type}")
    missing = [f for f in floors if not f.canonical]
    if missing:
        why = "; ".join(
            f"{f.workload}: its graph runs one call {f.pieces} times on pieces of the data (a loop?)"
            if f.pieces >= PIECES
            else f"{f.workload}: its graph cannot be replayed as the reference computes"
            for f in missing
        )
        return CanonicalScore(
            score=None,
            basis="no score: there is no canonical reference, only the contributor's (the dataset has no match; "
            f"{why}); write the reference vectorised, or an organizer judges the speed-ups by hand",
            workloads=floors,
        )
    factor = weighted_geomean([f.factor for f in floors], weights)
    if any(f.dataset for f in floors):
        basis = (
            "the dataset's reference where it has the computation ("
            + ", ".join(f"{f.workload} = {f.dataset}" for f in floors if f.dataset)
            + "), else the reference's canonical graph"
        )
    else:
        basis = "the reference's canonical graph (dead and repeated work left out); the dataset has no match"
    return CanonicalScore(score=speedup * factor, basis=basis, reference_slowdown=1.0 / factor, workloads=floors)
