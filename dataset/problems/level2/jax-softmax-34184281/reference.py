"""scope:gemma_backbone/decoder_block/attention/softmax as called in jax:keras:GemmaBackbone,hidden_dim=256,intermediate_dim=1024,num_query_heads=8,num_key_value_heads=1,head_dim=32,vocabulary_size=1024 prefill (batch 1, seq 128, vocabulary_size 1024, num_layers 2, num_query_heads 8, num_key_value_heads 1, hidden_dim 256, intermediate_dim 1024, head_dim 32)

Written by `gpuarena harvest`: the 18 primitives traced in the layer's scope, on inputs redrawn with the recorded
shapes, dtypes and value ranges."""

import math

import jax
import jax.numpy as jnp
import torch

# name -> rank, dtype, stride (None: contiguous), recorded value range (None: unknown), the deviation of
# a normal draw whose extreme at the recorded size (numel) is the recorded one, sorted (offsets), the axis a
# sorted input ends at (None: its recorded maximum), the axis indices stay below
INPUTS = {
    "x0": {
        "rank": 5,
        "dtype": "int32",
        "stride": None,
        "low": 0.0,
        "high": 1.0,
        "spread": 0.22699079912827205,
        "numel": 16384,
        "ascending": False,
        "high_axis": None,
        "below_axis": "x1_2"
    },
    "x1": {
        "rank": 5,
        "dtype": "float32",
        "stride": None,
        "low": -7.282108306884766,
        "high": 12.011916160583496,
        "spread": 2.474344143654389,
        "numel": 131072,
        "ascending": False,
        "high_axis": None,
        "below_axis": None
    }
}


@jax.jit
def reference(x0, x1):
    t0 = jax.lax.gt_p.bind(x0, jnp.asarray(0, dtype=jnp.dtype('int32')))
    t1 = jax.lax.convert_element_type_p.bind(jnp.asarray(-1000000000.0, dtype=jnp.dtype('float32')), new_dtype=jnp.dtype('float32'), sharding=None, weak_type=False)
    t2 = jax.lax.broadcast_in_dim_p.bind(t0, broadcast_dimensions=(0, 1, 2, 3, 4), shape=(1, 1, 8, 128, 128), sharding=None)
    t3 = jax.lax.broadcast_in_dim_p.bind(t1, broadcast_dimensions=(), shape=(1, 1, 8, 128, 128), sharding=None)
    t4 = jax.lax.select_n_p.bind(t2, t3, x1)
    t5 = jax.lax.reduce_max_p.bind(t4, axes=(4,))
    t6 = jax.lax.max_p.bind(jnp.asarray(float('-inf'), dtype=jnp.dtype('float32')), t5)
    t7 = jax.lax.broadcast_in_dim_p.bind(t6, broadcast_dimensions=(0, 1, 2, 3), shape=(1, 1, 8, 128, 1), sharding=None)
    t8 = t7
    t9 = jax.lax.sub_p.bind(t4, t8)
    t10 = jax.lax.exp_p.bind(t9, accuracy=None)
    t11 = jax.lax.reduce_sum_p.bind(t10, axes=(4,), out_sharding=None)
    t12 = jax.lax.broadcast_in_dim_p.bind(t11, broadcast_dimensions=(0, 1, 2, 3), shape=(1, 1, 8, 128, 1), sharding=None)
    t13 = jax.lax.div_p.bind(t10, t12)
    t14 = jax.lax.convert_element_type_p.bind(jnp.asarray(0.0, dtype=jnp.dtype('float32')), new_dtype=jnp.dtype('float32'), sharding=None, weak_type=False)
    t15 = jax.lax.broadcast_in_dim_p.bind(t0, broadcast_dimensions=(0, 1, 2, 3, 4), shape=(1, 1, 8, 128, 128), sharding=None)
    t16 = jax.lax.broadcast_in_dim_p.bind(t14, broadcast_dimensions=(), shape=(1, 1, 8, 128, 128), sharding=None)
    t17 = jax.lax.select_n_p.bind(t15, t16, t13)
    return t17


def _tensors(result):
    """The op's tensors, as recorded: attention ops also return sizes and None."""
    if isinstance(result, torch.Tensor):
        return result
    tensors = tuple(t for t in result if isinstance(t, torch.Tensor))
    return tensors[0] if len(tensors) == 1 else tensors


def _strides(shape, spec):
    """The recorded strides at the recorded size; on a workload of other shapes, the same order of
    dimensions packed (the recorded strides there read a storage of the recorded size: Mixtral's
    experts drawn at 8 x 40 x 48 drew 822 million numbers)."""
    stride = spec["stride"]
    if stride is None or math.prod(shape) == spec["numel"]:
        return stride
    packed, step = [0] * len(shape), 1
    for d in sorted(range(len(shape)), key=lambda d: (abs(stride[d]), -d)):
        if stride[d]:  # a broadcast dimension keeps its 0
            packed[d], step = step, step * int(shape[d])
    return packed


def _draw(shape, spec, device, generator, axes):
    dtype = getattr(torch, spec["dtype"])
    size = [int(s) for s in shape]
    stride = _strides(size, spec)
    if stride is not None:  # redraw the storage the strides read from
        size = [1 + sum((s - 1) * abs(st) for s, st in zip(shape, stride))]
    low, high = spec["low"], spec["high"]
    scale = 0.5 + torch.rand((), generator=generator, device=device)
    if dtype == torch.bool:
        values = torch.rand(size, generator=generator, device=device) < 0.5
    elif not dtype.is_floating_point:
        lo, hi = int(low or 0), int(axes[spec["high_axis"]] if spec["high_axis"] else (high or 1))
        if spec["below_axis"]:  # indices into a tensor of this workload's size
            hi = min(hi, axes[spec["below_axis"]] - 1)
        if hi <= lo:
            lo, hi = (0, hi) if hi > 0 else (lo, lo + 1)
        values = torch.randint(lo, hi + 1, size, generator=generator, device=device)
        if spec["ascending"]:  # offsets: sorted, ending where the recorded ones ended
            values = values.sort().values
            values[-1] = hi
    elif low is not None and high is not None and min(low, -high) < -1e30:  # a mask: 0 or the dtype's extreme
        values = torch.where(torch.rand(size, generator=generator, device=device) < 0.5, low, high)
    elif low is not None and high is not None and low >= 0 and high > 0:  # a positive input (rsqrt, log): keep it so
        lo = low if low > 0 else (1e-2 * high if high > 0 else 1e-2)
        hi = high if high > lo else 2 * lo
        values = lo + (hi - lo) * torch.rand(size, generator=generator, device=device)
    else:
        spread = 1.0
        if low is not None and high is not None and high > low:  # the model's scale at its size; wider when shrunk
            spread = spec["spread"] if math.prod(shape) >= spec["numel"] else max(abs(low), abs(high)) / 2
        offset = 0.1 * spread * (2 * torch.rand((), generator=generator, device=device) - 1)
        values = torch.randn(size, generator=generator, device=device) * spread * scale + offset
    values = values.to(dtype)
    return values.as_strided(shape, stride) if stride is not None else values


def make_inputs(axes, dtype, device, generator):
    return {name: _draw([axes[f"{name}_{d}"] for d in range(spec["rank"])], spec, device, generator, axes)
            for name, spec in INPUTS.items()}
