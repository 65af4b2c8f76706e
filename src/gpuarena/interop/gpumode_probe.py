"""Probing a GPU MODE task's data (see interop/gpumode.py): generate_input and ref_kernel run on
the task's own entries to find the output buffers in data, the inputs' names, each workload's
dtype and the structure of data's layout."""

from __future__ import annotations

import ast
import keyword
import re
from typing import Any

from gpuarena.interop.gpumode_device import ON_DEVICE
from gpuarena.interop.gpumode_solution import META_INPUT, RUNTIME
from gpuarena.interop.gpumode_task import Case, Task

_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")


# -- probing the data ---------------------------------------------------------------------------


def _runtime(device: str = "cuda") -> dict[str, Any]:
    """RUNTIME and ON_DEVICE, for probing on `device` (generate_input's data made there)."""
    namespace: dict[str, Any] = {"probe_device": device}
    exec(compile(RUNTIME + ON_DEVICE, "gpumode_runtime", "exec"), namespace)  # gpuarena's own code
    return namespace


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
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
    if isinstance(value, (tuple, list)):
        items = [_replace_leaf(v, target, new, counter) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
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


def _generate(task: Task, case: Case, seed: int, rt: dict[str, Any]) -> Any:
    """generate_input on the entry's arguments, its data made on the probe's device where that
    is not CUDA (gpumode_device.py)."""
    import contextlib
    import copy

    import torch

    device = torch.device(rt["probe_device"])
    here = rt["on_device"](device) if device.type != "cuda" else contextlib.nullcontext()
    with here:
        return task.namespace["generate_input"](**copy.deepcopy(case.args), seed=seed)  # lists: its own copy


def _ref(task: Task, data: Any) -> Any:
    import torch

    with torch.no_grad():
        return task.namespace["ref_kernel"](_clone(data))


def find_buffers(task: Task, case: Case, data: Any, rt: dict[str, Any]) -> dict[int, str]:
    """Tensors of data that ref_kernel writes into or does not read: output buffers (index ->
    "zeros" where generate_input made them zero, else "empty")."""
    import torch

    tensors, _ = rt["flatten"](data)
    device = rt["device_of"](tensors)
    copy = _clone(data)
    with torch.no_grad():
        out = task.namespace["ref_kernel"](copy)
    spec = rt["output_spec"](out)
    expected = rt["outputs"](_clone(out), spec, device)
    written = {i for i, (a, b) in enumerate(zip(tensors, rt["flatten"](copy)[0])) if not torch.equal(a, b)}
    other, _ = rt["flatten"](_generate(task, case, case.seed + 7919, rt))
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
    return {i: "zeros" if not bool(tensors[i].any()) else "empty" for i in sorted(written | unread)}


def _input_names(task: Task, layout: tuple[Any, ...]) -> list[str]:
    """One name per tensor leaf: from `a, b, c = data` in ref_kernel where it says, else data0..."""
    top: list[str | None] = []
    for node in ast.parse(task.sources["reference.py"]).body:
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            param = node.args.args[0].arg
            for statement in node.body:
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
    return (kind,)


def _workload_dtype(tensors: list[Any]) -> str:
    names = [_dtype_name(t.dtype) for t in tensors]
    for name in names:
        if name in _FLOAT_DTYPES:
            return name
    return next((n for n in names if n in _DTYPES), "float32")
