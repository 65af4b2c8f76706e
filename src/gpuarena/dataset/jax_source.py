"""JAX values written as Python source for a harvested reference: a primitive's parameters and
literals, the primitive itself, and cuDNN's fused attention written as the portable op.

cuDNN's attention is the primitive KerasHub's layers run on a GPU (`jax.nn.dot_product_attention`
with cuDNN: `dot_product_attention_fwd_wrapper`, whose `MaskType` is not jax.lax's). It is written
as `jax.nn.dot_product_attention` with the recorded scale, mask and window, as a PyTorch harvest
writes cuDNN's SDPA as `F.scaled_dot_product_attention`: the same computation on any device (XLA's
implementation, JAX's default), for a solution to beat with cuDNN's or its own. Only what a
forward pass uses is written: no dropout, padding lengths, offsets, page tables or training
outputs.

`_sizes` is written into a reference whose body names sizes (`S(n)`, dataset/jax_sizes.py)."""

from __future__ import annotations

import enum
import inspect
import math
from typing import Any

import numpy as np

from gpuarena.dataset import candidate
from gpuarena.dataset.jax_trace import Const, Equation

CUDNN_ATTENTION = "dot_product_attention_fwd_wrapper"


def _sizes(recorded, inputs):  # written into references as it is
    """`S`: a size the reference's body names (recorded), at its inputs' shapes. A smaller workload
    divides the recorded sizes by one factor f (`dataset.small_workload.scale_down`); so does S."""
    factors = {r / a for shape, x in zip(recorded, inputs) for r, a in zip(shape, x.shape) if r != a}
    if len(factors) > 1 or any(f != int(f) for f in factors):
        raise ValueError(
            f"the inputs' shapes {[tuple(x.shape) for x in inputs]} are not the recorded {recorded} "
            "divided by one factor"
        )
    f = int(factors.pop()) if factors else 1

    def S(size):
        if isinstance(size, float):
            return size / f
        if size % f:
            raise ValueError(f"the size {size} the reference names does not divide by the workload's factor {f}")
        return size // f

    return S


SIZES_SOURCE = inspect.getsource(_sizes).replace("  # written into references as it is", "")
"""`_sizes` as a reference holds it."""

_HEAD = '''"""{title}

Written by `gpuarena harvest`: {what}, on inputs redrawn with the recorded
shapes, dtypes and value ranges."""

import math

import jax
import jax.numpy as jnp
import torch

# name -> rank, dtype, stride (None: contiguous), recorded value range (None: unknown), the deviation of
# a normal draw whose extreme at the recorded size (numel) is the recorded one, sorted (offsets), the axis a
# sorted input ends at (None: its recorded maximum), the axis indices stay below
INPUTS = {specs}
'''
_REFERENCE = """

@jax.jit
def reference({params}):
{body}
""" + "".join(candidate.TEMPLATE.partition(candidate.HELPERS_START)[1:])
JAX_TEMPLATE = _HEAD + _REFERENCE
SIZED_TEMPLATE = _HEAD + "\n\n" + SIZES_SOURCE.replace("{", "{{").replace("}", "}}") + _REFERENCE
"""A reference whose body names sizes (`S`): with `_sizes`."""


class Unwritable(Exception):
    """A parameter or primitive that cannot be written into a reference (the reason)."""


def param_source(value: Any) -> str:
    """A primitive's parameter as Python source that rebuilds it."""
    import jax

    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        return repr(float(value)) if math.isfinite(value) else f"float({str(float(value))!r})"
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return f"jnp.dtype({np.dtype(value).name!r})"
    if isinstance(value, enum.Enum):
        if getattr(jax.lax, type(value).__name__, None) is type(value):
            return f"jax.lax.{type(value).__name__}.{value.name}"
        raise Unwritable(f"parameter value {value!r} is not one of jax.lax's")
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        if getattr(jax.lax, type(value).__name__, None) is not type(value):
            raise Unwritable(f"parameter value {value!r} is not one of jax.lax's")
        fields = ", ".join(f"{k}={param_source(v)}" for k, v in zip(value._fields, value))
        return f"jax.lax.{type(value).__name__}({fields})"
    if isinstance(value, (tuple, list)):
        items = [param_source(v) for v in value]
        if isinstance(value, list):
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    raise Unwritable(f"a parameter of type {type(value).__name__} ({str(value)[:60]})")


def literal_source(const: Const) -> str:
    if const.shape:
        return f"jnp.zeros({const.shape!r}, dtype=jnp.dtype({const.dtype!r}))"
    value = np.asarray(const.value).item()
    if isinstance(value, float) and not math.isfinite(value):
        text = f"float({str(value)!r})"
    else:
        text = repr(value)
    return f"jnp.asarray({text}, dtype=jnp.dtype({const.dtype!r}))"


def primitive_source(eqn: Equation) -> str:
    import jax

    if getattr(jax.lax, f"{eqn.name}_p", None) is not eqn.primitive:
        raise Unwritable(f"the primitive {eqn.name} is not jax.lax.{eqn.name}_p")
    return f"jax.lax.{eqn.name}_p.bind"


def attention_source(eqn: Equation, args: list[str], empty: list[bool]) -> str:
    """cuDNN's attention (`eqn`, with its inputs written as `args`; `empty`: which of them hold
    nothing) as the expression of its outputs, a one-element tuple."""
    from jax._src.cudnn.fused_attention_stablehlo import AttentionLayout, MaskType

    params = eqn.params
    mask = params["mask_type"]
    if params.get("is_training"):
        raise Unwritable("cuDNN attention's training outputs (its softmax statistics)")
    if float(params.get("dropout_rate") or 0.0):
        raise Unwritable("cuDNN attention with dropout")
    if mask not in (MaskType.NO_MASK, MaskType.CAUSAL):
        raise Unwritable(f"cuDNN attention with the mask {mask.name}")
    if not all(empty[4:]):
        raise Unwritable("cuDNN attention with sequence lengths, offsets or page tables")
    query, key, value, bias = args[:4]
    heads_second = params["layout"] == AttentionLayout.BNTH.value
    if heads_second:  # jax.nn's layout is (batch, tokens, heads, head_dim)
        query, key, value = (f"jnp.swapaxes({a}, 1, 2)" for a in (query, key, value))
    options = [
        f"bias={bias if params['variadic_args'][0] else None}",
        f"scale={float(params['scale'])!r}",
        f"is_causal={mask == MaskType.CAUSAL}",
    ]
    window = params.get("sliding_window_length")
    if window:  # cuDNN's window holds the token itself: jax.nn's left window is one less
        options.append(f"local_window_size=({int(window)} - 1, 0)")  # the window a size (jax_sizes)
    call = f"jax.nn.dot_product_attention({query}, {key}, {value}, {', '.join(options)})"
    return f"(jnp.swapaxes({call}, 1, 2),)" if heads_second else f"({call},)"
