"""Probing a GPU MODE task's data (see interop/gpumode.py): generate_input and ref_kernel run on
the task's own entries to find the output buffers in data, the inputs' names, each workload's
dtype and the structure of data's layout."""

from __future__ import annotations

import ast
import keyword
import re
from typing import Any

from gpuarena.interop.gpumode_device import GLOBAL_SEED, ON_DEVICE, SEEDED
from gpuarena.interop.gpumode_solution import META_INPUT, RUNTIME
from gpuarena.interop.gpumode_task import Case, Task
from gpuarena.problems.model import DTYPES

OTHER = 7919
"""The probe's second draw of an entry: its seed (and the global one) plus this."""
DYNAMIC_CONSTANT = 1024
"""In a workload the importer could not probe, an input with at least this many elements, one
value everywhere, is taken for a constant of the workload (see find_constants)."""
_FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


# -- probing the data ---------------------------------------------------------------------------


def _runtime(device: str = "cuda", namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    """RUNTIME, ON_DEVICE and SEEDED, for probing on `device` (generate_input's data made there);
    the task's own dataclasses and namedtuples (from its namespace) rebuild its data."""
    rt: dict[str, Any] = {"probe_device": device}
    exec(compile(RUNTIME + ON_DEVICE + SEEDED, "gpumode_runtime", "exec"), rt)  # gpuarena's own code
    rt["OWN_CLASSES"].update(own_classes(namespace or {}))
    return rt


def own_classes(namespace: dict[str, Any]) -> dict[str, type]:
    """The dataclasses and namedtuples a task's reference.py defines or imports, by name."""
    import dataclasses

    return {
        name: value
        for name, value in namespace.items()
        if isinstance(value, type) and (dataclasses.is_dataclass(value) or hasattr(value, "_fields"))
    }


def _object_items(value: Any) -> list[tuple[str, Any]] | None:
    """The fields of a dataclass, namedtuple or SimpleNamespace in data (in _flatten's order)."""
    import dataclasses
    import types

    fields: tuple[str, ...] | None = getattr(type(value), "_fields", None) if isinstance(value, tuple) else None
    if fields is not None:
        return [(k, getattr(value, k)) for k in fields]
    if type(value) is types.SimpleNamespace:
        return list(vars(value).items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    return None


def _remade(value: Any, items: dict[str, Any]) -> Any:
    """An object like value (dataclass, namedtuple or SimpleNamespace) with these fields."""
    import dataclasses
    import types

    if isinstance(value, tuple):
        return type(value)(**items)
    if type(value) is types.SimpleNamespace:
        return types.SimpleNamespace(**items)
    return dataclasses.replace(value, **items)


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    items = _object_items(value)
    if items is not None:
        return _remade(value, {k: _clone(v) for k, v in items})
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _replace_leaf(value: Any, target: int, new: Any, counter: list[int]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        counter[0] += 1
        return new if counter[0] - 1 == target else value
    items = _object_items(value)
    if items is not None:
        return _remade(value, {k: _replace_leaf(v, target, new, counter) for k, v in items})
    if isinstance(value, (tuple, list)):
        replaced = [_replace_leaf(v, target, new, counter) for v in value]
        return tuple(replaced) if isinstance(value, tuple) else replaced
    if isinstance(value, dict):
        return {k: _replace_leaf(v, target, new, counter) for k, v in value.items()}
    return value


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    import torch

    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor)
        and isinstance(y, torch.Tensor)
        and x.shape == y.shape
        and x.dtype == y.dtype
        and torch.equal(x, y)
        for x, y in zip(a, b)
    )


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _generate(task: Task, case: Case, seed: int, rt: dict[str, Any], global_seed: int = GLOBAL_SEED) -> Any:
    """generate_input on the entry's arguments, its data made on the probe's device, with the
    global generators seeded as GPU MODE's eval.py seeds them (gpumode_device.drawn_input)."""
    import copy

    import torch

    device = torch.device(rt["probe_device"])
    # lists in the arguments: generate_input's own copy
    return rt["drawn_input"](task.namespace["generate_input"], copy.deepcopy(case.args), seed, global_seed, device)


def _ref(task: Task, data: Any) -> Any:
    import torch

    with torch.no_grad():
        return task.namespace["ref_kernel"](_clone(data))


def find_buffers(
    task: Task, case: Case, data: Any, rt: dict[str, Any], untouched: set[int] | None = None
) -> dict[int, str]:
    """Tensors of data that are output buffers (index -> "zeros" where generate_input made them
    zero, else "empty"): those ref_kernel writes into, and the task's declared output that it
    replaces with a tensor of its own (pmpp_v2's `data, output = data; output = ...`): one it
    does not read, of as many elements as one of its outputs. Any other tensor it does not read
    stays an input with its values: a submission may need it (nvfp4's rearranged scale factors,
    a second copy of an input in another layout). `untouched` (gpumode_reads.unread: the tensors
    no op of ref_kernel touches, None where unknown) must hold a declared output too: an input
    that ref_kernel reads but that happens not to matter on this entry is no buffer (GPU MODE's
    gated_deltanet_chunk_fwd_h on one chunk multiplies w by a zero state, and k, w were made
    empty buffers)."""
    import torch

    tensors, _ = rt["flatten"](data)
    device = rt["device_of"](tensors)
    copy = _clone(data)
    with torch.no_grad():
        out = task.namespace["ref_kernel"](copy)
    spec = rt["output_spec"](out)
    expected = rt["outputs"](_clone(out), spec, device)
    written = {i for i, (a, b) in enumerate(zip(tensors, rt["flatten"](copy)[0])) if not torch.equal(a, b)}
    other, _ = rt["flatten"](_generate(task, case, case.seed + OTHER, rt, GLOBAL_SEED + OTHER))
    unread = set()
    for i, t in enumerate(tensors):
        if i in written or i >= len(other) or other[i].shape != t.shape or other[i].dtype != t.dtype:
            continue
        fresh = other[i].to(t.device)
        if torch.equal(fresh, t):
            # Two draws agree (a constant, or two torch.empty buffers that happened to get the same
            # memory): whether ref_kernel reads it is asked with values that differ for sure.
            fresh = torch.logical_not(t) if t.dtype == torch.bool else t + 1
        try:
            result = rt["outputs"](_ref(task, _replace_leaf(data, i, fresh, [0])), spec, device)
        except Exception:  # e.g. an index pushed out of range: ref_kernel reads it
            continue
        if _same(result, expected):
            unread.add(i)
    sizes = {o.numel() for o in expected if isinstance(o, torch.Tensor)}
    declared = {i for i in unread if tensors[i].numel() in sizes and (untouched is None or i in untouched)}
    return {i: "zeros" if not bool(tensors[i].any()) else "empty" for i in sorted(written | declared)}


def probed(tensors: list[Any], buffers: dict[int, str], rt: dict[str, Any]) -> tuple[int, str, dict[int, Any]]:
    """What the import keeps of an entry's draw, so that its tensors can go before the next is
    drawn (held for every entry, GPU MODE's trimul, 3.2 GB an entry, went past 8 GB): its
    elements, its dtype, and the inputs (indices among the tensors that are not buffers) that
    are one value everywhere in it, with that value (what find_constants draws again for)."""
    kept = [t for i, t in enumerate(tensors) if i not in buffers]
    one_value = {i: value for i, t in enumerate(kept) if (value := rt["constant_of"](t)) is not None}
    return sum(t.numel() for t in tensors), _workload_dtype(tensors), one_value


def find_constants(
    task: Task, case: Case, candidates: dict[int, Any], buffers: dict[int, str], rt: dict[str, Any]
) -> list[int]:
    """The one-value inputs of an entry's draw (probed) that are the same in a second draw of other seeds:
    constants of the workload (trimul's mask of ones where it says nomask), which travel as
    (CONSTANT, shape, dtype, value) and are made on every call, like buffers, rather than passed
    as inputs that a check would call degenerate. A draw that fails leaves the entry without
    constants."""
    if not candidates:
        return []
    try:
        other, _ = rt["flatten"](_generate(task, case, case.seed + OTHER, rt, GLOBAL_SEED + OTHER), buffers)
    except Exception:
        return []
    return [i for i, value in candidates.items() if i < len(other) and rt["constant_of"](other[i]) == value]


def _input_names(task: Task, layout: tuple[Any, ...]) -> list[str]:
    """One name per tensor leaf: from `a, b, c = data` in ref_kernel where it says (the first
    such line, in a block too), else data0..."""
    top: list[str | None] = []
    for node in ast.parse(task.sources["reference.py"]).body:
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            param = node.args.args[0].arg
            # the first such line, inside a `with` block too (bioml/trimul unpacks data there)
            for statement in (n for top_level in node.body for n in ast.walk(top_level)):
                if (
                    isinstance(statement, ast.Assign)
                    and isinstance(statement.value, ast.Name)
                    and statement.value.id == param
                    and len(statement.targets) == 1
                    and isinstance(statement.targets[0], (ast.Tuple, ast.List))
                ):
                    top = [e.id if isinstance(e, ast.Name) else None for e in statement.targets[0].elts]
                    break
    names: list[str] = []

    def walk(node: tuple[Any, ...], parts: list[str]) -> None:
        kind = node[0]
        if kind == "t":
            names.append("_".join(parts) or "data")
        elif kind in ("tuple", "list"):
            for i, child in enumerate(node[1]):
                label = (top[i] if parts == [] and i < len(top) and top[i] else None) or (
                    f"data{i}" if not parts else str(i)
                )
                walk(child, [*parts, label])
        elif kind == "dict":
            for key, child in node[1]:
                walk(child, [*parts, key] if parts else ["data", key])
        elif kind == "o":
            for key, child in node[4]:
                walk(child, [*parts, key])

    walk(layout, [])
    clean: list[str] = []
    for name in names:
        name = re.sub(r"\W+", "_", name).strip("_") or "data"
        if name[0].isdigit() or keyword.iskeyword(name) or name in (META_INPUT, "reference", "make_inputs"):
            name = f"data_{name}"
        base, k = name, 1
        while name in clean:
            name, k = f"{base}_{k}", k + 1
        clean.append(name)
    return clean


def _shape_of(layout: tuple[Any, ...]) -> Any:
    """A layout's structure without its scalar values (sizes differ between entries)."""
    kind = layout[0]
    if kind in ("tuple", "list"):
        return (kind, tuple(_shape_of(c) for c in layout[1]))
    if kind == "dict":
        return (kind, tuple((k, _shape_of(c)) for k, c in layout[1]))
    if kind == "o":
        return (kind, *layout[1:4], tuple((k, _shape_of(c)) for k, c in layout[4]))
    return (kind,)


def _workload_dtype(tensors: list[Any]) -> str:
    names = [_dtype_name(t.dtype) for t in tensors]
    for name in names:
        if name in _FLOAT_DTYPES:
            return name
    return next((n for n in names if n in DTYPES), "float32")
