"""The reference.py of an imported FlashInfer-Trace definition: its reference verbatim, then
gpuarena's glue (reference(), make_inputs(), fixed_inputs()), which reads flashinfer.json and
flashinfer_inputs.json beside it."""

from __future__ import annotations

from gpuarena.interop.flashinfer_sidecar import REFERENCE_END, REFERENCE_HEADER
from gpuarena.interop.flashinfer_trace import Definition

_GLUE = '''
# Below: gpuarena's glue, written by `gpuarena import flashinfer`. It reads the definition from
# flashinfer.json beside this file: reference() calls run() above; make_inputs() draws every
# tensor input at its declared shape and dtype (floats: standard normal times a random scale in
# [0.5, 1.5), drawn in float32 and cast; integers: uniform in [-128, 128) for int8, [-1024, 1024)
# otherwise; bools: fair coins), passes every scalar input the value all the workloads give it,
# and None for an optional input the workloads leave out. Where the workloads' inputs differ
# (a safetensors input, an optional input some give, a scalar whose value differs), the axis
# flashinfer.json names as workload_axis says whose inputs these are: its recorded tensors
# (flashinfer_inputs.json, the same in every draw; fixed_inputs() names them), its own scalar
# values, and None where it leaves an input out.

import base64 as _gpuarena_base64
import json as _gpuarena_json
from pathlib import Path as _GpuarenaPath

import torch as _gpuarena_torch

_GPUARENA_FOLDER = _GpuarenaPath(__file__).parent
_GPUARENA = _gpuarena_json.loads((_GPUARENA_FOLDER / "flashinfer.json").read_text(encoding="utf-8"))
_GPUARENA_DEFINITION = _GPUARENA["definition"]
_GPUARENA_DTYPE = {dtype!r}
"""The workloads' dtype: the least precise float output's (fp8 outputs: see problem.toml's tolerance)."""
_GPUARENA_RECORDED = {{}}


def _gpuarena_outputs(result):
    """run()'s result in the order of the definition's outputs (a dict is accepted, as FlashInfer does)."""
    if isinstance(result, dict):
        values = tuple(result[name] for name in _GPUARENA_DEFINITION["outputs"])
        return values[0] if len(values) == 1 else values
    return result


def reference({params}):
    """The definition's run(); returns its outputs in the order of `outputs` in problem.toml."""
    return _gpuarena_outputs(run({params}))


def _gpuarena_random(shape, dtype, device, generator):
    if dtype.is_floating_point:
        x = _gpuarena_torch.randn(shape, generator=generator, device=device, dtype=_gpuarena_torch.float32)
        scale = 0.5 + _gpuarena_torch.rand((), generator=generator, device=device)
        return (x * scale).to(dtype)
    if dtype == _gpuarena_torch.bool:
        return _gpuarena_torch.randint(0, 2, shape, generator=generator, device=device).to(dtype)
    low, high = (-128, 128) if dtype == _gpuarena_torch.int8 else (-1024, 1024)
    return _gpuarena_torch.randint(low, high, shape, generator=generator, device=device, dtype=dtype)


def _gpuarena_recorded(source, device):
    """A workload's safetensors tensor, as the import kept it (read once per process)."""
    if not _GPUARENA_RECORDED:
        path = _GPUARENA_FOLDER / "flashinfer_inputs.json"
        _GPUARENA_RECORDED.update(_gpuarena_json.loads(path.read_text(encoding="utf-8"))["tensors"])
    entry = _GPUARENA_RECORDED[source["path"]][source["tensor_key"]]
    dtype = getattr(_gpuarena_torch, entry["dtype"])
    raw = bytearray(_gpuarena_base64.b64decode(entry["data"]))
    if not raw:
        return _gpuarena_torch.empty(entry["shape"], dtype=dtype, device=device)
    flat = _gpuarena_torch.frombuffer(raw, dtype=_gpuarena_torch.uint8).view(dtype)
    return flat.reshape(entry["shape"]).to(device)


def _gpuarena_given(axes):
    """The inputs the workload gives, by name (None: not one of the recorded workloads)."""
    index = axes.get(_GPUARENA.get("workload_axis") or "", None)
    return None if index is None else _GPUARENA["workload_inputs"][index]


def fixed_inputs(axes):
    """The inputs that are the workload's recorded data, the same in every draw (`gpuarena
    check` does not ask them to change with the seed)."""
    given = _gpuarena_given(axes) or {{}}
    return [name for name, source in given.items() if source["type"] == "safetensors"]


def make_inputs(axes, dtype, device, generator):
    """Inputs for one workload; dtype must be the definition's (its dtypes are fixed)."""
    if dtype != getattr(_gpuarena_torch, _GPUARENA_DTYPE):
        raise ValueError(f"this problem's dtypes are fixed by its FlashInfer-Trace definition; {{dtype}} is not its dtype")
    sizes = dict(axes)
    for name, axis in _GPUARENA_DEFINITION["axes"].items():
        if axis["type"] == "const" and sizes.setdefault(name, axis["value"]) != axis["value"]:
            raise ValueError(f"axis {{name}} is constant ({{axis['value']}}) in the definition, not {{sizes[name]}}")
    given = _gpuarena_given(axes)
    inputs = {{}}
    for name, spec in _GPUARENA_DEFINITION["inputs"].items():
        source = given.get(name) if given is not None else None
        if (name not in given) if given is not None else (name in _GPUARENA.get("omitted", ())):
            inputs[name] = None
        elif source is not None and source["type"] == "safetensors":
            inputs[name] = _gpuarena_recorded(source, device)
        elif source is not None and source["type"] == "scalar":
            inputs[name] = source["value"]
        elif spec["shape"] is None:
            inputs[name] = _GPUARENA["scalars"][name]
        else:
            shape = tuple(sizes[axis] for axis in spec["shape"])
            inputs[name] = _gpuarena_random(shape, getattr(_gpuarena_torch, spec["dtype"]), device, generator)
    return inputs
'''


def reference_py(definition: Definition, dtype: str) -> str:
    """reference.py: the definition's reference between the markers, then the glue."""
    block = definition.reference if definition.reference.endswith("\n") else definition.reference + "\n"
    glue = _GLUE.format(params=", ".join(definition.inputs), dtype=dtype)
    return f"{REFERENCE_HEADER}\n{block}{REFERENCE_END}\n" + glue
