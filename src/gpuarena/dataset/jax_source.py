"""JAX values written as Python source for a harvested reference: a primitive's parameters and
literals, the primitive itself, and cuDNN's fused attention written as the portable op.

cuDNN's attention is the primitive KerasHub's layers run on a GPU (`jax.nn.dot_product_attention`
with cuDNN: `dot_product_attention_fwd_wrapper`, whose `MaskType` is not jax.lax's). It is written
as `jax.nn.dot_product_attention` with the recorded scale, mask and window, as a PyTorch harvest
writes cuDNN's SDPA as `F.scaled_dot_product_attention`: the same computation on any device (XLA's
implementation, JAX's default), for a solution to beat with cuDNN's or its own. Only what a
forward pass uses is written: no dropout, padding lengths, offsets, page tables or training
outputs."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from gpuarena.dataset.jax_trace import Const, Equation

CUDNN_ATTENTION = "dot_product_attention_fwd_wrapper"


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
        options.append(f"local_window_size=({int(window) - 1}, 0)")
    call = f"jax.nn.dot_product_attention({query}, {key}, {value}, {', '.join(options)})"
    return f"(jnp.swapaxes({call}, 1, 2),)" if heads_second else f"({call},)"
