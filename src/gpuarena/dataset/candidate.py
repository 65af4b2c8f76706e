"""One group of recorded calls written as a gpuarena problem folder: problem.toml and a
reference.py that calls the aten op itself (torch.ops.aten...) on inputs redrawn with the
recorded shapes, dtypes, strides and value ranges, its other arguments fixed as recorded.

Whether the op can be a problem at all is decided here too (`unsupported`), so that the harvest
reports why a group was not written rather than writing something that cannot load.
"""

from __future__ import annotations

import json
import keyword
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuarena.dataset.record import ArgRecord, CallRecord, TensorInfo
from gpuarena.problems.model import DTYPES


def param_names(args: list[ArgRecord]) -> dict[tuple[int, int], str]:
    """(argument index, element index) -> a Python parameter name for each input tensor."""
    names: dict[tuple[int, int], str] = {}
    used: set[str] = set()
    for i, arg in enumerate(args):
        base = "x" if arg.name == "self" else arg.name
        if not base.isidentifier() or keyword.iskeyword(base):
            base = f"arg{i}"
        infos = [arg.tensor] if arg.tensor is not None else arg.tensors or []
        for j, _ in enumerate(infos):
            name = base if arg.tensor is not None else f"{base}_{j}"
            while name in used:
                name += "_"
            used.add(name)
            names[(i, j)] = name
    return names


def unsupported(call: CallRecord) -> str | None:
    """Why this call cannot be written as a problem yet; None where it can."""
    if call.metadata_only:
        return "a view or metadata op: no data moves, nothing for a kernel to do"
    if call.mutates:
        return "writes into an argument: a reference must be pure"
    if not call.outputs:
        return "returns no tensor"
    if not any(a.kind in ("tensor", "tensors") for a in call.args):
        return "no tensor input (a factory op such as arange, ones or empty)"
    for arg in call.args:
        if arg.kind == "other":
            return f"argument {arg.name} ({arg.value}) cannot be written into a reference yet"
    for info in [*_inputs(call), *kept_outputs(call)]:  # a norm's saved statistics: empty on the CPU
        if info.dtype not in DTYPES:
            return f"dtype {info.dtype} is not one problems support"
        if 0 in info.shape:
            return "an empty tensor"
    return None


FIRST_RESULT_ONLY = ("aten._scaled_dot_product_",)
"""Ops whose first result is the problem: attention's others (log-sum-exp, the RNG's seed and
offset, a debug mask) are for its backward, and some are left unwritten, so never deterministic."""


STABLE_ORDER = {
    "aten.sort.default": "torch.ops.aten.sort.stable",
    "aten.argsort.default": "torch.ops.aten.argsort.stable",
}
"""Sorts written as stable ones: where values tie (a MoE's expert ids, 8 values over 4096 tokens),
an unstable sort's indices are one order among many, so a correct kernel could not match them;
ties kept in their input order make the answer unique."""


NORM_SAVED_FOR_BACKWARD = (
    "aten.native_layer_norm.",
    "aten.native_group_norm.",
    "aten.native_batch_norm.",
    "aten._native_batch_norm_legit",
)
"""Norms whose first result is the problem: the others (the mean and reciprocal deviation per
row or group) are saved for the backward, which inference never runs and a fused kernel never
writes; and a mean of centred activations is below a bfloat16 tolerance everywhere, so the
check refused every harvested LayerNorm of BERT, ViT and StarCoder2 for it."""


def kept_outputs(call: CallRecord) -> list[TensorInfo]:
    """The results a problem of this call returns."""
    first_only = call.op.startswith(FIRST_RESULT_ONLY) or call.op.startswith(NORM_SAVED_FOR_BACKWARD)
    return call.outputs[:1] if first_only else call.outputs


def output_names(call: CallRecord) -> list[str]:
    """problem.toml's outputs for the results a problem of this call returns."""
    results = kept_outputs(call)
    return [f"out{k}" for k in range(len(results))] if len(results) > 1 else ["output"]


def _inputs(call: CallRecord) -> list[TensorInfo]:
    return [t for a in call.args for t in ([a.tensor] if a.tensor is not None else a.tensors or [])]


def _literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _expression(arg: ArgRecord, index: int, names: dict[tuple[int, int], str]) -> str:
    if arg.kind == "tensor":
        return names[(index, 0)]
    if arg.kind == "tensors":
        return "[" + ", ".join(names[(index, j)] for j in range(len(arg.tensors or []))) + "]"
    if arg.kind == "none":
        return "None"
    if arg.kind == "torch":
        return str(arg.value)  # "torch.float32": a torch attribute, checked by the import
    return _literal(arg.value)


def _attention(call: CallRecord, names: dict[tuple[int, int], str]) -> str | None:
    """Attention as the portable op, whichever backend's op was recorded (cuDNN's, flash's, the
    CPU's): `scaled_dot_product_attention` runs on every device, and each picks its own kernel.
    None where the call cannot be said that way (dropout: no reference with it is deterministic)."""
    by_name = {a.name: (i, a) for i, a in enumerate(call.args)}
    if any(name not in by_name for name in ("query", "key", "value")):
        return None
    dropout = by_name.get("dropout_p")
    if dropout is not None and dropout[1].value not in (0, 0.0):
        return None
    parts = [_expression(by_name[n][1], by_name[n][0], names) for n in ("query", "key", "value")]
    mask = by_name.get("attn_bias") or by_name.get("attn_mask")
    if mask is not None and mask[1].kind != "none":
        parts.append(f"attn_mask={_expression(mask[1], mask[0], names)}")
    for option in ("is_causal", "scale"):
        if option in by_name and by_name[option][1].kind != "none":
            parts.append(f"{option}={_expression(by_name[option][1], by_name[option][0], names)}")
    query, key = by_name["query"][1].tensor, by_name["key"][1].tensor
    if query is not None and key is not None and query.shape[-3:-2] != key.shape[-3:-2]:
        parts.append("enable_gqa=True")  # fewer key/value heads than query heads
    return _laid_out(
        f"torch.nn.functional.scaled_dot_product_attention({', '.join(parts)})",
        call.outputs[0] if call.outputs else None,
    )


def _laid_out(expression: str, recorded: TensorInfo | None) -> str:
    """`expression`'s result laid out in memory as the recorded output was: each backend lays its
    output out its own way (flash's heads inside its sequence, the math backend's contiguous), and
    the recorded calls after it may be views that only the recorded layout allows (an H100's
    SDPA gave Mixtral's decoder layer a layout its `view` refused)."""
    if recorded is None or recorded.contiguous or len(recorded.stride) != len(recorded.shape):
        return expression
    order = sorted(range(len(recorded.stride)), key=lambda d: (-recorded.stride[d], d))
    if order == list(range(len(order))):
        return expression
    back = [order.index(d) for d in range(len(order))]
    return f"{expression}.permute({', '.join(map(str, order))}).contiguous().permute({', '.join(map(str, back))})"


def _other_axes(call: CallRecord, names: dict[tuple[int, int], str], info: TensorInfo) -> Iterator[tuple[int, str]]:
    """(size, axis name) of every dimension of the call's other tensor inputs."""
    for (i, j), name in names.items():
        arg = call.args[i]
        other = arg.tensor if arg.tensor is not None else (arg.tensors or [])[j]
        if other is not info:
            yield from ((size, f"{name}_{d}") for d, size in enumerate(other.shape))


def _size_named(call: CallRecord, names: dict[tuple[int, int], str], info: TensorInfo) -> str | None:
    """The axis that offsets end at: a sorted integer input whose last value is the size of another
    input's dimension (`_grouped_mm`'s offs end at its rows) ends at that axis whatever its size,
    so a smaller workload keeps offsets that fit."""
    if not info.ascending or info.high is None:
        return None
    return next((axis for size, axis in _other_axes(call, names, info) if size == info.high), None)


def _bound_named(call: CallRecord, names: dict[tuple[int, int], str], info: TensorInfo) -> str | None:
    """The axis that indices stay below: an unsorted integer input (indices into another input, as
    `index` and `embedding` take) is bounded by the smallest dimension of another input larger than
    its recorded maximum, so a smaller workload draws indices that its tensors have. (Where that is
    not the dimension indexed, the bound is only tighter: sizes shrink in order.)"""
    if info.ascending or info.high is None or info.dtype in ("bool", "float16", "bfloat16", "float32", "float64"):
        return None
    larger = [(size, axis) for size, axis in _other_axes(call, names, info) if size > info.high]
    return min(larger, key=lambda pair: pair[0])[1] if larger else None


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def reference_source(call: CallRecord, title: str) -> str:
    names = param_names(call.args)
    call_args = [
        (_expression(a, i, names) if not a.keyword else f"{a.name}={_expression(a, i, names)}")
        for i, a in enumerate(call.args)
    ]
    result = _attention(call, names) if call.op.startswith(FIRST_RESULT_ONLY) else None
    if result is None and call.op in STABLE_ORDER:  # every argument but the tensor is keyword-only there
        tail = [f"{a.name}={_expression(a, i, names)}" for i, a in enumerate(call.args) if i > 0]
        result = f"_tensors({STABLE_ORDER[call.op]}({', '.join([call_args[0], 'stable=True', *tail])}))"
    if result is None:
        result = f"_tensors({call.op.replace('aten.', 'torch.ops.aten.', 1)}({', '.join(call_args)}))"
        if len(kept_outputs(call)) < len(call.outputs):
            result += "[0]"
    return render(call, title, "the recorded aten call", [f"return {result}"])


def render(call: CallRecord, title: str, what: str, body: list[str], template: str | None = None) -> str:
    """reference.py: `reference(inputs)` running `body` (lines of its function), and make_inputs
    drawing the call's tensor arguments as recorded (shapes, dtypes, strides, value ranges).
    `template`: another head with the same drawing (a JAX reference's, dataset/jax_harvest.py)."""
    names = param_names(call.args)
    specs = {}
    for (i, j), name in names.items():
        arg = call.args[i]
        info = arg.tensor if arg.tensor is not None else (arg.tensors or [])[j]
        specs[name] = {
            "rank": len(info.shape),
            "dtype": info.dtype,
            "stride": None if info.contiguous else info.stride,
            "low": _finite(info.low),
            "high": _finite(info.high),
            "spread": _spread(info),
            "numel": math.prod(info.shape),
            "ascending": info.ascending,
            "high_axis": _size_named(call, names, info),
            "below_axis": _bound_named(call, names, info),
        }
    return (template or TEMPLATE).format(
        title=title,
        what=what,
        params=", ".join(names.values()),
        body="\n".join(f"    {line}" for line in body),
        specs=json.dumps(specs, indent=4).replace("null", "None").replace("true", "True").replace("false", "False"),
    )


def _spread(info: TensorInfo) -> float | None:
    """The standard deviation of a normal draw whose largest value over the recorded element
    count is about the recorded extreme (the expected maximum of n normal draws is about
    sqrt(2 ln n) deviations). Half the extreme, as drawn before, made a Llama attention's scores
    ten times too wide: its softmax saturated and a bfloat16 reference differed from itself in
    float32 on 59% of its elements, so every honest kernel failed (torch.compile on 30 of 32
    level-4 problems on an H200). A shrunk workload (the CPU's) keeps the wide draw: with the
    model's scale at a sixteenth of its width, attention is uniform and its query irrelevant."""
    low, high = _finite(info.low), _finite(info.high)
    if low is None or high is None:
        return None
    return max(abs(low), abs(high)) / max(1.0, math.sqrt(2 * math.log(max(2, math.prod(info.shape)))))


TEMPLATE = '''"""{title}

Written by `gpuarena harvest`: {what}, on inputs redrawn with the recorded
shapes, dtypes, strides and value ranges."""

import math

import torch

# name -> rank, dtype, stride (None: contiguous), recorded value range (None: unknown), the deviation of
# a normal draw whose extreme at the recorded size (numel) is the recorded one, sorted (offsets), the axis a
# sorted input ends at (None: its recorded maximum), the axis indices stay below
INPUTS = {specs}


def reference({params}):
{body}


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
    return {{name: _draw([axes[f"{{name}}_{{d}}"] for d in range(spec["rank"])], spec, device, generator, axes)
            for name, spec in INPUTS.items()}}
'''


HELPERS_START = "\n\ndef _tensors(result):"


def refresh_helpers(source: str) -> str:
    """A harvested reference.py with today's input drawing (`_tensors`, `_draw`, `make_inputs`):
    what the writer learnt since (a zero-initialised bias is redrawn at the activations' scale)
    reaches problems whose reference is not written anew from a call, as a module's graph is."""
    head, found, _ = source.partition(HELPERS_START)
    if not found:
        return source
    tail = TEMPLATE.partition(HELPERS_START)[2].replace("{{", "{").replace("}}", "}")
    return head + HELPERS_START + tail


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


def problem_toml(
    call: CallRecord,
    name: str,
    summary: str,
    weight: float,
    models: list[str],
    tags: list[str],
    level: int = 1,
    framework: str = "pytorch",
) -> str:
    names = param_names(call.args)
    axes: dict[str, int] = {}
    for (i, j), param in names.items():
        arg = call.args[i]
        info = arg.tensor if arg.tensor is not None else (arg.tensors or [])[j]
        axes.update({f"{param}_{d}": size for d, size in enumerate(info.shape)})
    results = kept_outputs(call)
    floating = [t.dtype for t in [*results, *_inputs(call)] if t.dtype in ("float32", "float16", "bfloat16", "float64")]
    dtype = floating[0] if floating else results[0].dtype
    outputs = output_names(call)
    axes_text = "{ " + ", ".join(f"{k} = {v}" for k, v in axes.items()) + " }" if axes else "{}"
    return f"""name = {json.dumps(name)}
level = {level}
summary = {json.dumps(summary)}
tags = {_toml_list(tags)}
weight = {weight:.6g}
convention = "return"
outputs = {_toml_list(outputs)}

[provenance]
framework = {json.dumps(framework)}
operator = {json.dumps(call.op)}
models = {_toml_list(models)}

[[workloads]]
name = "recorded"
axes = {axes_text}
dtype = {json.dumps(dtype)}
weight = 1.0
devices = ["cpu", "cuda"]
"""


def write(
    folder: Path,
    call: CallRecord,
    name: str,
    summary: str,
    weight: float,
    models: list[str],
    tags: list[str],
    level: int = 1,
    reference: str | None = None,
    framework: str = "pytorch",
) -> Path:
    """Write the problem folder for this (representative) call, or for a module's graph (its
    reference given, `call` standing for its inputs and results); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "problem.toml").write_text(problem_toml(call, name, summary, weight, models, tags, level, framework))
    (folder / "reference.py").write_text(reference or reference_source(call, summary))
    return folder
