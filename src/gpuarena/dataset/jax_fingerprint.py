"""A JAX problem's fingerprint, taken on JAX's side: the primitives `jax.make_jaxpr` traces its
reference into, on abstract arrays of the workload's shapes and dtypes (no data, nothing run).

A JAX reference cannot run on PyTorch's fake tensors: DLPack hands JAX the fake tensor's data
pointer, which points at nothing, and XLA reads it (the SIGSEGV of `gpuarena sample check
--problems dataset/problems`, issue 48; jax_bridge.to_jax now refuses such tensors). JAX has
its own abstract evaluation, so its problems are fingerprinted by it: each call is the
primitive's name (prefixed `jax.`, so it never meets a PyTorch op), its inputs' (shape, dtype)
and its integer, boolean and text parameters. Calls of jitted functions are inlined.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from gpuarena.dataset.jax_trace import BODY_PARAMS, INLINED
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload


def _param(value: Any) -> Any:
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (bool, int, str)) for v in value):
        return tuple(value)
    return None  # jaxprs, floats, shardings, precision enums: not part of the key


def _walk(jaxpr: Any, calls: Counter) -> None:
    for eqn in jaxpr.eqns:
        body = next((eqn.params[k] for k in BODY_PARAMS if k in eqn.params), None)
        if eqn.primitive.name in INLINED and body is not None:
            _walk(body.jaxpr if hasattr(body, "jaxpr") else body, calls)
            continue
        ins = tuple((tuple(int(s) for s in v.aval.shape), str(v.aval.dtype)) for v in eqn.invars if hasattr(v, "aval"))
        params = tuple(sorted((k, p) for k, v in eqn.params.items() if (p := _param(v)) is not None))
        calls[(f"jax.{eqn.primitive.name}", ins, params)] += 1


def jax_fingerprint(problem: Problem, workload: Workload) -> tuple[tuple[Any, int], ...] | None:
    """The workload's JAX-side fingerprint, or None where its inputs or trace cannot be made."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuarena.jax_bridge import start

    try:
        start(torch.device("cpu"))  # 64-bit dtypes kept, as the harness runs the reference
        import jax

        with FakeTensorMode(allow_non_fake_inputs=True):
            generator = torch.Generator(device="cpu").manual_seed(0)
            inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)
        names = [name for name, v in inputs.items() if isinstance(v, torch.Tensor)]
        shapes = [
            jax.ShapeDtypeStruct(tuple(inputs[n].shape), str(inputs[n].dtype).removeprefix("torch.")) for n in names
        ]

        def call(*arrays: Any) -> Any:
            return problem.module.reference(**{**inputs, **dict(zip(names, arrays))})

        closed = jax.make_jaxpr(call)(*shapes)
    except Exception:
        return None
    calls: Counter = Counter()
    _walk(closed.jaxpr, calls)
    return tuple(sorted(calls.items(), key=repr))
