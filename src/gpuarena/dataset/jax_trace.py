"""A JAX model's forward as a flat list of primitive calls, run one by one: what a JAX harvest
groups into problems (dataset/jax_harvest.py).

`jax.make_jaxpr` gives the program XLA would compile. Calls of jitted functions and of functions
with custom derivatives (softmax, an einsum) are inlined, so each equation left is one
primitive (dot_general, exp, reduce_max...), tagged with the full name scope it was traced in
(Keras and Flax name each layer's scope: `llama_backbone/transformer_layer_0/self_attention`),
which is how a layer's equations are found again as a fusion. Running the equations one by one
(`Primitive.bind`, each compiled on its own) gives every call's inputs, their value ranges and
its time: the time a primitive takes alone, not its share of XLA's fused program, which has no
per-primitive times on the CPU.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from gpuarena.dataset.record import TensorInfo

if TYPE_CHECKING:
    from jax.core import ShapedArray  # a literal's aval, typed by jax as AbstractValue

INLINED = (
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
    "remat",
    "checkpoint",
    "custom_lin",
)
"""Primitives whose body is a jaxpr of its own, inlined (their parameters name it)."""
BODY_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


@dataclass
class Const:
    """A literal in an equation (a scalar the tracer kept inline), or (with a shape) an array of
    that value written into a reference."""

    value: Any
    dtype: str
    shape: tuple[int, ...] = ()


@dataclass
class Equation:
    """One primitive call of the flattened program: inputs are value ids (or literals)."""

    index: int
    primitive: Any
    params: dict[str, Any]
    inputs: list[int | Const]
    outputs: list[int]
    scope: str

    @property
    def name(self) -> str:
        return str(self.primitive.name)


@dataclass
class Trace:
    """The flattened program, and what running it saw: each value's TensorInfo and each
    equation's seconds (summed over the timed runs)."""

    inputs: list[int]
    """The ids of the forward's arguments and of the constants it closes over (weights)."""
    outputs: list[int]
    equations: list[Equation]
    constants: dict[int, Any] = field(default_factory=dict)
    """The values of the closure's constants and of the literals the inlining made values, by id."""
    info: dict[int, TensorInfo] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)


def dtype_name(dtype: Any) -> str:
    return np.dtype(dtype).name


def _info(value: Any) -> TensorInfo:
    array = np.asarray(value)
    low = high = None
    numeric = array.dtype != np.bool_ and (np.issubdtype(array.dtype, np.number) or array.dtype.name == "bfloat16")
    if array.size and numeric:
        wide = array.astype(np.float64)
        low, high = float(wide.min()), float(wide.max())
    ascending = bool(
        array.ndim == 1
        and array.size > 1
        and np.issubdtype(array.dtype, np.integer)
        and bool((array[1:] >= array[:-1]).all())
    )
    stride: list[int] = []
    step = 1
    for size in reversed(array.shape):
        stride.insert(0, step)
        step *= max(size, 1)
    return TensorInfo(
        shape=list(array.shape),
        dtype=dtype_name(array.dtype),
        stride=stride,
        contiguous=True,
        low=low,
        high=high,
        ascending=ascending,
    )


def flatten(closed: Any) -> Trace:
    """The closed jaxpr's equations with every inlined call's body in its place; the closure's
    constants become inputs after the arguments."""
    from jax.extend.core import Literal

    equations: list[Equation] = []
    ids = itertools.count()

    def fresh() -> int:
        return next(ids)

    def walk(jaxpr: Any, env: dict[Any, int], prefix: str) -> list[int | Const]:
        for eqn in jaxpr.eqns:
            ins: list[int | Const] = []
            for var in eqn.invars:
                if isinstance(var, Literal):
                    ins.append(Const(var.val, dtype_name(cast("ShapedArray", var.aval).dtype)))
                else:
                    ins.append(env[var])
            scope = "/".join(part for part in (prefix, str(eqn.source_info.name_stack)) if part)
            body = next((eqn.params[k] for k in BODY_PARAMS if k in eqn.params), None)
            if eqn.primitive.name in INLINED and body is not None:
                inner = body.jaxpr if hasattr(body, "jaxpr") else body
                consts = list(getattr(body, "consts", []))
                inner_env: dict[Any, int] = {}
                for var, value in zip(inner.constvars, consts):
                    inner_env[var] = const_value(value)
                for var, given in zip(inner.invars, ins):
                    inner_env[var] = given if isinstance(given, int) else literal_value(given)
                results = walk(inner, inner_env, scope)
                for var, result in zip(eqn.outvars, results):
                    env[var] = result if isinstance(result, int) else literal_value(result)
                continue
            outs = []
            for var in eqn.outvars:
                env[var] = fresh()
                outs.append(env[var])
            equations.append(Equation(len(equations), eqn.primitive, dict(eqn.params), ins, outs, scope))
        return [
            Const(v.val, dtype_name(cast("ShapedArray", v.aval).dtype)) if isinstance(v, Literal) else env[v]
            for v in jaxpr.outvars
        ]

    constants: dict[int, Any] = {}

    def const_value(value: Any) -> int:
        given = fresh()
        constants[given] = value
        return given

    def literal_value(literal: Const) -> int:
        return const_value(np.asarray(literal.value, dtype=literal.dtype))

    env: dict[Any, int] = {}
    arguments = []
    for var in closed.jaxpr.invars:
        env[var] = fresh()
        arguments.append(env[var])
    for var, value in zip(closed.jaxpr.constvars, closed.consts):
        env[var] = const_value(value)
    results = walk(closed.jaxpr, env, "")
    outputs = [r if isinstance(r, int) else literal_value(r) for r in results]
    return Trace(inputs=arguments + list(constants), outputs=outputs, equations=equations, constants=constants)


def run(trace: Trace, arguments: list[Any], repeats: int = 3, clock: Callable[[], float] = time.perf_counter) -> Trace:
    """Run the equations one by one, `repeats` times after one untimed run (which compiles each
    primitive for its shapes): each value's TensorInfo from the first run, each equation's
    seconds summed over the timed runs. Returns the trace, filled in."""
    import jax

    constants = trace.constants
    trace.seconds = [0.0] * len(trace.equations)
    for attempt in range(repeats + 1):
        values: dict[int, Any] = dict(constants)
        values.update(zip(trace.inputs[: len(arguments)], arguments))
        for eqn in trace.equations:
            args = [
                jax.numpy.asarray(v.value, dtype=v.dtype) if isinstance(v, Const) else values[v] for v in eqn.inputs
            ]
            started = clock()
            result = eqn.primitive.bind(*args, **eqn.params)
            jax.block_until_ready(result)
            if attempt:
                trace.seconds[eqn.index] += clock() - started
            results = list(result) if eqn.primitive.multiple_results else [result]
            values.update(zip(eqn.outputs, results))
        if not attempt:
            trace.info = {key: _info(value) for key, value in values.items()}
    return trace
