"""What a problem computes, as a key to find the same problem twice: the aten operators its
reference runs on each workload's inputs, with their tensors' shapes and dtypes.

Two problems are the same problem when they run the same operators on the same shapes,
however the references are written or named (`torch.softmax(x, -1)` and
`F.softmax(x, dim=-1)` both run `aten._softmax` on the same tensor). The references run on
fake tensors (shapes and dtypes, no data), so a workload of 65536 x 2048 costs no memory; a
reference (or make_inputs) that needs real values (`.item()`, inputs redrawn until they suit)
runs for real on its CPU workloads, and its GPU-only workloads have no fingerprint.

`canonical=True` compares computations, not spellings (dataset/computation.py): the reference
decomposed to PyTorch's primitives, views and copies left out, leading batch dims merged, so
`F.rms_norm` on [B, S, H] and a hand-written RMSNorm on [B*S, H] have one fingerprint. A
sample's duplicate check uses it; the default stays the plain aten calls. A reference written
in JAX is fingerprinted on JAX's side either way (dataset/jax_fingerprint.py): it cannot run on
fake tensors.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from gpuarena.dataset.record import METADATA_OPS
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload

Call = tuple[str, tuple[tuple[tuple[int, ...], str], ...]]
"""One call: the op's name (aten._softmax) and its tensor arguments' (shape, dtype)."""
Fingerprint = tuple[tuple[Any, int], ...]
"""A workload's calls as a sorted multiset: the order of independent calls does not matter
(a Call each, or a canonical call: computation.Call, or a JAX primitive's call)."""


class _Calls(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[Call] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func._schema.name.split("::")[-1]
        if func.namespace == "aten" and name not in METADATA_OPS:  # not prim.device and the like
            flat, _ = tree_flatten((args, kwargs or {}))
            tensors = tuple(
                (tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in flat if isinstance(t, torch.Tensor)
            )
            self.calls[(name, tensors)] += 1
        return func(*args, **(kwargs or {}))


def _inputs(problem: Problem, workload: Workload) -> dict[str, Any]:
    device = torch.device("cpu")
    generator = torch.Generator(device=device).manual_seed(0)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, device, generator)


def _calls(problem: Problem, inputs: dict[str, Any]) -> Fingerprint:
    recorder = _Calls()
    with torch.no_grad(), recorder:
        problem.reference(**inputs)
    return tuple(sorted(recorder.calls.items()))


def _canonical(problem: Problem, inputs: dict[str, Any], fake: bool) -> Fingerprint:
    from gpuarena.dataset.computation import canonical_calls, trace

    tensors = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
    return canonical_calls(trace(problem.reference, inputs, fake=fake), tensors)


def fingerprint(problem: Problem, workload: Workload, canonical: bool = False) -> Fingerprint | None:
    """The workload's fingerprint, or None where the reference runs neither on fake tensors nor,
    being a CPU workload, for real (then the workload cannot be matched)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    if problem.spec.provenance.framework == "jax":
        from gpuarena.dataset.jax_fingerprint import jax_fingerprint

        return jax_fingerprint(problem, workload)
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            inputs = _inputs(problem, workload)
            return _canonical(problem, inputs, fake=True) if canonical else _calls(problem, inputs)
    except Exception:
        if "cpu" not in workload.devices:
            return None
    try:
        inputs = _inputs(problem, workload)
        return _canonical(problem, inputs, fake=False) if canonical else _calls(problem, inputs)
    except Exception:
        return None


def fingerprints(problem: Problem, canonical: bool = False) -> dict[str, Fingerprint]:
    """Every workload's fingerprint that could be taken, by workload name."""
    found = {}
    for workload in problem.spec.workloads:
        taken = fingerprint(problem, workload, canonical)
        if taken:
            found[workload.name] = taken
    return found


def index(
    roots: list[Path], skip: Path | None = None, canonical: bool = False
) -> dict[Fingerprint, list[tuple[str, str]]]:
    """Every workload fingerprint of the problems under `roots` -> the (problem id, workload)
    pairs that have it; `skip`: a problem folder to leave out (the one being compared)."""
    from gpuarena.problems.loader import discover

    found: dict[Fingerprint, list[tuple[str, str]]] = {}
    for root in roots:
        for problem in discover(root):
            if skip is not None and problem.path.resolve() == skip.resolve():
                continue
            for name, taken in _fingerprints_of(problem, canonical).items():
                found.setdefault(taken, []).append((problem.id, name))
    return found


def _fingerprints_of(problem: Problem, canonical: bool) -> dict[str, Fingerprint]:
    """A known problem's fingerprints: the kept ones where its files and this code were kept
    (dataset/kept_fingerprints.py: the bundled problems, canonical), else taken afresh."""
    if canonical:
        from gpuarena.dataset.kept_fingerprints import kept
        from gpuarena.errors import GpuarenaError
        from gpuarena.problems.pack import pack_problem

        try:
            found = kept(pack_problem(problem).hash)
        except GpuarenaError:
            found = None
        if found is not None:
            return found
    return fingerprints(problem, canonical)


def matches(ours: dict[str, Fingerprint], known: dict[Fingerprint, list[tuple[str, str]]]) -> dict[str, dict[str, str]]:
    """For each known problem that `ours` (workload -> fingerprint) repeats in part: our workloads
    matched, each to that problem's workload with the same fingerprint."""
    matched: dict[str, dict[str, str]] = {}
    for name, taken in ours.items():
        for problem, workload in known.get(taken, []):
            matched.setdefault(problem, {}).setdefault(name, workload)
    return matched
