"""jax.lax.reduce_sum as called in jax:keras:LlamaBackbone,vocabulary_size=32000,num_layers=32,num_query_heads=32,num_key_value_heads=32,hidden_dim=4096,intermediate_dim=11008 prefill (batch 1, seq 2048, vocabulary_size 32000, num_layers 32, num_query_heads 32, num_key_value_heads 32, hidden_dim 4096, intermediate_dim 11008)

Written by `gpuarena harvest`: the recorded primitive, on inputs redrawn with the recorded
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
        "rank": 3,
        "dtype": "float32",
        "stride": None,
        "low": 2.388844677625457e-09,
        "high": 0.000836983323097229,
        "spread": 0.00014822626260502063,
        "numel": 8388608,
        "ascending": False,
        "high_axis": None,
        "below_axis": None
    }
}


@jax.jit
def reference(x0):
    t0 = jax.lax.reduce_sum_p.bind(x0, axes=(2,), out_sharding=None)
    return t0


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
