"""A submodule's recorded calls as a straight-line graph: a fusion problem (levels 2-4).

While a harvest records a model, it also notes each call of each submodule (an RMSNorm, an MLP,
an attention block, a decoder layer) with the span of aten calls it made, and every tensor
argument's origin (record.py). From those, the module's computation is its aten calls from its
inputs to the results it returned: the calls that lead to those results (and every write into a
tensor) are kept, in order, and written as `torch.ops.aten` lines. Its inputs are whatever the
calls read that they did not make: the module's arguments, its weights, what earlier modules
computed (the rotary tables). The module's weight is the device time of its span's kernels.

Sizes inside the calls (a view's [batch, seq, heads, head_dim]) are written as the inputs' own
sizes where one matches (`hidden_states.shape[1]`), or a share of one (`// heads`), a small size
times one (batch x seq), or a multiple of one (a fused qkv's 2 x hidden), so that the dataset's
small workload of a fusion (every size over 32 divided by one factor, small_workload.scale_down)
computes the same function on smaller tensors. A size that matches none stays as recorded; such
a problem's small workload fails its check and the dataset leaves it out, with the reason.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuarena.dataset.candidate import FIRST_RESULT_ONLY, _attention, _literal
from gpuarena.dataset.record import ArgRecord, CallRecord, ModuleCall, TensorInfo

MAX_CALLS = 400
"""Aten calls (views included) a module may make to be written as one problem: a decoder layer
makes about 60, a whole model thousands."""
SMALL_LIMIT = 32
"""Sizes up to this are kept by the dataset's small workload (small_workload.SMALL_LIMIT): written as recorded."""

MATMUL_OPS = frozenset(
    {
        "mm",
        "bmm",
        "addmm",
        "baddbmm",
        "matmul",
        "linear",
        "_grouped_mm",
        "convolution",
        "_convolution",
        "addmv",
        "mv",
        "dot",
        "_scaled_mm",
    }
)
DATA_DEPENDENT_OPS = frozenset(
    {
        "_local_scalar_dense",
        "nonzero",
        "masked_select",
        "unique",
        "_unique2",
        "unique_consecutive",
        "unique_dim",
        "bincount",
        "item",
    }
)
"""Ops whose results' sizes (or the Python values they give) depend on the data: a straight-line
replay on new inputs would keep the recorded sizes (MoE routing's per-expert counts, say)."""
RANDOM_OPS = frozenset(
    {
        "bernoulli",
        "bernoulli_",
        "rand",
        "randn",
        "randint",
        "rand_like",
        "randn_like",
        "normal",
        "normal_",
        "uniform_",
        "native_dropout",
        "multinomial",
        "randperm",
    }
)


BOUNDS = frozenset({"start", "end", "length", "split_size", "split_sizes"})
"""Arguments that index into an axis rather than size a tensor."""
INTEGER = frozenset({"int8", "int16", "int32", "int64", "uint8"})
VIEWS = frozenset({"aten.view.default", "aten._unsafe_view.default"})


@dataclass
class ModuleGraph:
    call: CallRecord
    """Stands for the graph as a call: its args are the graph's inputs, its outputs the results."""
    body: list[str]
    """The reference's lines."""
    level: int
    ops: int
    """Calls that do work (views not counted)."""
    fixed: list[int]
    """Sizes over SMALL_LIMIT written as recorded (no input's size matched them)."""
    module: ModuleCall
    """The call it was made from (to make it again, with inputs found ignored)."""


def _base(op: str) -> str:
    return op.split(".")[1]


def _identifier(text: str) -> str:
    name = "".join(ch if ch.isalnum() else "_" for ch in text).strip("_") or "input"
    if name[0].isdigit() or keyword.iskeyword(name) or name in ("torch", "reference") or _is_temporary(name):
        name = f"in_{name}"
    return name


def _is_temporary(name: str) -> bool:
    return name.startswith("t") and name[1:].replace("_", "").isdigit()


def level_of(ops: list[str]) -> int:
    """2: a fusion without a matrix multiply; 3: with one; 4: a model's block (attention, experts'
    grouped matrix multiplies, or five matrix multiplies and more, as a decoder layer has)."""
    matmuls = sum(_base(op) in MATMUL_OPS for op in ops)
    experts = any(_base(op) == "_grouped_mm" for op in ops)
    if any(op.startswith(FIRST_RESULT_ONLY) for op in ops) or matmuls >= 5 or experts:
        return 4
    return 3 if matmuls else 2


RESIDUAL_SUFFIX = "+residual"
"""The class name of a norm fused with the residual add before it (residual_norms)."""


def residual_norms(calls: Sequence[CallRecord], modules: Sequence[ModuleCall]) -> list[ModuleCall]:
    """Fusions across a module's boundary: each norm whose input is a residual add made just
    before it (a pre-norm decoder's `hidden = residual + hidden; residual = hidden; norm(hidden)`,
    the add in the layer and the norm its child, or the add ending one layer and the norm starting
    the next) as one call from the add to the norm's end, returning the sum (the next residual) and
    the norm's result: what a fused add-norm kernel computes. The add must be elementwise between
    two tensors of its result's shape (a bias add broadcasts, and is not a residual)."""
    fused = []
    for module in modules:
        if "Norm" not in module.cls or module.start < 1 or len(module.inputs) != 1:
            continue
        (origin,) = module.inputs.values()
        add = calls[module.start - 1]
        if list(origin) != [add.index, 0] or add.op != "aten.add.Tensor" or len(add.outputs) != 1:
            continue
        tensors = [(a.tensor, a.origins) for a in add.args if a.tensor is not None and a.origins]
        shape = add.outputs[0].shape
        if len(tensors) != 2 or any(tensor.shape != shape for tensor, _ in tensors):
            continue
        names = ["residual", "hidden_states"]
        fused.append(
            ModuleCall(
                path=module.path + RESIDUAL_SUFFIX,
                cls=module.cls + RESIDUAL_SUFFIX,
                start=add.index,
                end=module.end,
                inputs={name: list(origins[0]) for name, (_, origins) in zip(names, tensors)},
                outputs=[[add.index, 0], *module.outputs],
            )
        )
    return fused


def _reads_outside(span: Sequence[CallRecord], start: int, result: tuple[int, int]) -> bool:
    """Whether a result of the span's calls depends on a tensor made before the span (an input,
    a weight): a result made from factories alone is a constant, which a module may return
    beside what it computed (T5's cross-attention returns its position bias, zeros), and which
    the check would refuse the whole graph for (a constant output)."""
    needed = {result}
    for call in reversed(span):
        if not call.mutates and not any((call.index, k) in needed for k in range(len(call.outputs))):
            continue  # a write into a tensor may be into the result: followed as the graph follows it
        for arg in call.args:
            for origin in arg.origins or []:
                if not start <= origin[0] < call.index:
                    return True
                needed.add((origin[0], origin[1]))
    return False


def module_graph(
    calls: Sequence[CallRecord],
    module: ModuleCall,
    externals: list[str],
    ignored: frozenset[str] = frozenset(),
    names: list[str] | None = None,
) -> ModuleGraph | str:
    """The module call as a graph, or why it cannot be one. `calls`: the recording's calls, by
    index; `externals`: the recording's names of its external tensors (Recorder.externals).
    ignored: inputs the output does not depend on (attention's key bias: softmax takes the same
    shift off every score of a row), made zeros in the reference rather than drawn, so that the
    degenerate filter's ignored-input test holds for the others.
    names: the graph's input names in the order they are met (an earlier writing's: `names_of`),
    instead of names made from the module's."""
    span = calls[module.start : module.end]
    if not span:
        return "made no aten call"
    if len(span) > MAX_CALLS:
        return f"{len(span)} aten calls: more than one problem should hold ({MAX_CALLS})"

    def inside(origin: list[int] | tuple[int, ...]) -> bool:
        return module.start <= origin[0] < module.end

    wanted = [(o[0], o[1]) for o in module.outputs if inside(o)]  # origins are [call, result] pairs
    wanted = [w for w in wanted if _reads_outside(span, module.start, w)]
    if not wanted:
        return "returned no tensor it computed"
    needed: set[tuple[int, int]] = set(wanted)
    kept: list[CallRecord] = []
    for call in reversed(span):  # what leads to the results, and every write into a tensor
        if call.mutates or any((call.index, k) in needed for k in range(len(call.outputs))):
            kept.append(call)
            needed.update((o[0], o[1]) for a in call.args for o in a.origins or [])
    kept.reverse()
    for call in kept:
        if _base(call.op) in DATA_DEPENDENT_OPS or call.op == "aten.repeat_interleave.Tensor":
            return f"{call.op}: sizes that depend on the data (a replay would keep the recorded ones)"
        if _base(call.op) in RANDOM_OPS:
            return f"{call.op}: random, so the reference would not be deterministic"

    # the graph's inputs: what the kept calls read and did not make, named after the module's own names
    arg_names = {tuple(o): name for name, o in module.inputs.items()}
    own = module.path.removesuffix(RESIDUAL_SUFFIX)  # a fused norm's weights are the norm's
    inputs: dict[tuple[int, int], tuple[str, TensorInfo]] = {}
    empties: dict[tuple[int, int], tuple[str, TensorInfo]] = {}
    """Empty tensors read (a KV cache's start) and ignored inputs: made in the reference, not drawn."""
    used: set[str] = set()
    for call in kept:
        for arg in call.args:
            infos = [arg.tensor] if arg.tensor is not None else arg.tensors or []
            for origin, info in zip(arg.origins or [], infos):
                key = (origin[0], origin[1])
                if inside(key) or key in inputs or key in empties:
                    continue
                hint = externals[key[1]] if key[0] < 0 and key[1] < len(externals) else ""
                if names is not None and len(used) < len(names):
                    name = names[len(used)]
                elif key in arg_names:
                    name = arg_names[key]
                elif hint.startswith(own + "."):
                    name = hint[len(own) + 1 :]
                else:
                    name = hint.rsplit(".", 2)[-2] + "_" + hint.rsplit(".", 1)[-1] if "." in hint else hint or "input"
                name = _identifier(name)
                while name in used:
                    name += "_"
                used.add(name)
                (empties if 0 in info.shape or name in ignored else inputs)[key] = (name, info)
    if not inputs:
        return "reads no tensor (its results are constants)"

    sizes: dict[int, str] = {}
    for name, info in inputs.values():
        for d, extent in enumerate(info.shape):
            sizes.setdefault(extent, f"{name}.shape[{d}]")
    fixed: list[int] = []

    def size(value: int, bound: bool = False) -> str:
        """A size as the inputs' sizes say it. bound: an index into an axis (a slice's start and
        end, a split's sizes), which follows the axis it halves even where it is small itself
        (rotary's x[..., :head_dim // 2])."""
        if bound and 0 < value <= SMALL_LIMIT and 2 * value in sizes and 2 * value > SMALL_LIMIT:
            return f"{sizes[2 * value]} // 2"
        if value <= SMALL_LIMIT or value >= 2**31:
            return repr(value)
        if value in sizes:
            return sizes[value]
        for k in range(2, SMALL_LIMIT + 1):  # a share of a size: head_dim = hidden // heads
            if k * value in sizes:
                return f"{sizes[k * value]} // {k}"
        for a, ea in sizes.items():  # a small size times a large one: batch x seq
            if 1 < a <= SMALL_LIMIT and value % a == 0 and value // a in sizes:
                return f"{ea} * {sizes[value // a]}"
        for k in range(2, SMALL_LIMIT + 1):  # a multiple of one: a fused qkv's 2 x hidden
            if value % k == 0 and value // k in sizes and value // k > SMALL_LIMIT:
                return f"{k} * {sizes[value // k]}"
        fixed.append(value)
        return repr(value)

    first_input = next(iter(inputs.values()))[0]
    mutated = {tuple(a.origins[0]) for c in kept if c.mutates for a in c.args[:1] if a.origins}
    body = [
        f"{name} = {name}.clone()  # the graph writes into it" for key, (name, _) in inputs.items() if key in mutated
    ]
    # an ignored tensor takes the shape of the first input of exactly its shape (a batch norm's zero
    # bias: its weight's [C]), not sizes matched one by one (the batch, where it equalled C)
    same_shape = {tuple(info.shape): f"{name}.shape" for name, info in reversed(list(inputs.values()))}
    body += [
        f"{name} = torch.{'empty' if 0 in info.shape else 'zeros'}"
        f"({same_shape.get(tuple(info.shape)) or _shape(info, sizes)}, dtype=torch.{info.dtype}, "
        f"device={first_input}.device)" + ("" if 0 in info.shape else "  # the result does not depend on it")
        for name, info in empties.values()
    ]
    named: dict[tuple[int, int], str] = {key: name for key, (name, _) in [*inputs.items(), *empties.items()]}
    for call in kept:
        n = len(call.outputs)
        for k in range(n):
            named[(call.index, k)] = f"t{call.index - module.start}" + (f"_{k}" if n > 1 else "")
        expression = _call_expression(call, named, size, first_input, reshape=not mutated)
        if expression is None:
            return f"{call.op}: an argument that cannot be written into a reference yet"
        if call.op.startswith(FIRST_RESULT_ONLY):
            if any((call.index, k) in needed for k in range(1, n)):
                return f"{call.op}: uses attention's extra results (for its backward)"
            body.append(f"{named[(call.index, 0)]} = {expression}")
        elif n == 0:
            body.append(expression)
        else:
            body.append(f"{', '.join(named[(call.index, k)] for k in range(n))} = _tensors({expression})")
    results = [named[o] for o in wanted]
    body.append(f"return {results[0]}" if len(results) == 1 else f"return {', '.join(results)}")
    args = [ArgRecord(name=name, kind="tensor", tensor=info) for name, info in inputs.values()]
    outputs = [calls[o[0]].outputs[o[1]] for o in wanted]
    ops = [c.op for c in kept if not c.metadata_only]
    standing = CallRecord(
        index=module.start,
        op=f"module:{module.cls}",
        args=args,
        outputs=outputs,
        seconds=0.0,
        metadata_only=False,
        mutates=False,
    )
    if len(ops) < 2:
        return "one op: its own level-1 problem covers it"
    return ModuleGraph(call=standing, body=body, level=level_of(ops), ops=len(ops), fixed=fixed, module=module)


def names_of(reference: str) -> tuple[list[str], frozenset[str]]:
    """The names an earlier writing (its reference.py) gave a graph's inputs, in the order the
    calls meet them (the order of their first use in its lines), and those it made zeros."""
    body = reference.split("def reference(", 1)[1]
    signature, _, body = body.partition(")")
    drawn = {n.strip() for n in signature.split(",") if n.strip()}
    lines = body.split("\n\n\ndef ", 1)[0].splitlines()
    made = {
        line.strip().split(" = ", 1)[0]: line
        for line in lines
        if line.strip().split(" = ", 1)[-1].startswith(("torch.zeros(", "torch.empty("))
    }
    known, seen = drawn | set(made), []
    for line in lines:
        if line.strip().split(" = ", 1)[0] in made or line.strip().endswith("# the graph writes into it"):
            continue
        for word in re.findall(
            r"\b[A-Za-z_][A-Za-z0-9_]*\b(?!\.shape|\.device)", line.split(" = ", 1)[-1]
        ):  # tensors, not sizes
            if word in known and word not in seen:
                seen.append(word)
    ignored = frozenset(n for n, line in made.items() if "torch.zeros(" in line)
    return seen, ignored


def _shape(info: TensorInfo, sizes: dict[int, str]) -> str:
    return "[" + ", ".join(sizes.get(d, repr(d)) if d > SMALL_LIMIT else repr(d) for d in info.shape) + "]"


def _call_expression(
    call: CallRecord, names: dict[tuple[int, int], str], size: Any, device_of: str, reshape: bool = False
) -> str | None:
    """`torch.ops.aten.<op>(...)` with tensors by name and sizes as the inputs' sizes; attention as
    the portable op. None where an argument cannot be written. reshape: a view as a reshape (the
    same values; a copy where the strides need one). The portable attention picks its kernel by
    device and size, and its output's strides with it: a view the recorded kernel's output allowed
    failed after another kernel's on the GPU at the small workload. Not where the graph writes
    into tensors, which may rely on a view sharing its base."""
    if call.op.startswith(FIRST_RESULT_ONLY):
        per_arg = {(i, j): names[(o[0], o[1])] for i, a in enumerate(call.args) for j, o in enumerate(a.origins or [])}
        portable = _attention(call, per_arg)
        if portable is not None:
            return portable
    parts = []
    for arg in call.args:
        if arg.kind == "tensor" or arg.kind == "tensors":
            refs = [names[(o[0], o[1])] for o in arg.origins or []]
            text = refs[0] if arg.kind == "tensor" else "[" + ", ".join(refs) + "]"
        elif arg.kind == "none":
            text = "None"
        elif arg.kind == "torch":
            text = str(arg.value)
        elif arg.kind == "int":
            text = size(arg.value, arg.name in BOUNDS)
        elif arg.kind == "ints":
            text = "[" + ", ".join(size(v, arg.name in BOUNDS) for v in arg.value) + "]"
        elif arg.kind == "other" and str(arg.value).startswith("device("):
            text = f"{device_of}.device"  # the device the inputs are on, whichever it is
        elif arg.kind == "other":
            return None
        else:
            text = _literal(arg.value)
        parts.append(f"{arg.name}={text}" if arg.keyword else text)
    if reshape and call.op in VIEWS:
        return f"torch.ops.aten.reshape.default({', '.join(parts)})"
    if _base(call.op) == "histc" and call.args[0].tensor is not None and call.args[0].tensor.dtype in INTEGER:
        # the CPU has no integer histc (CUDA has): count in float32, exact for these counts, and give back the dtype
        parts[0] = f"{parts[0]}.float()"
        return f"torch.ops.{call.op}({', '.join(parts)}).to(torch.{call.args[0].tensor.dtype})"
    return f"torch.ops.{call.op}({', '.join(parts)})"
