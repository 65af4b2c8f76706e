"""A GPU MODE submission (`custom_kernel(data)`, Python or inline CUDA through `load_inline`)
as a gpuarena solution, unmodified.

A one-file solution that defines `custom_kernel` and no `solve` (and no KernelBench `ModelNew`)
gets a second source, the adapter below, as its entry point (the reader below adds it
wherever a .py file becomes a solution: the CLI, uploads, packs; it registers itself with
solutions/readers.py). The adapter runs in the
worker like any solution code. It imports the file (with a stand-in `task` module where none is
importable: submissions say `from task import input_t, output_t`, type names only; the stand-in
defines input_t, output_t and TestSpec, as GPU MODE's task.py files do), and on each
call rebuilds GPU MODE's `data` from the problem's inputs: the tensors, then the last input
`gpumode_data` = (format, layout, output layout), a plain tuple that is the same in every draw
of a workload and holds nothing secret (see interop/gpumode.py). It calls `custom_kernel(data)`
and hands back its result as the tuple of tensors the reference returns (a Python number
becomes a 0-dim tensor of the reference's dtype). What it returns is judged like any solve()'s.

RUNTIME is the code both sides share (the adapter here, the glue in an imported problem's
reference.py): flattening `data` into tensors and a layout, rebuilding it, and turning a
result into tensors. This module imports nothing heavy beyond solutions/ (the adapter is only text here).
"""

from __future__ import annotations

import re
from typing import Literal

from gpuarena.solutions.loader import adapted_solution
from gpuarena.solutions.model import Solution
from gpuarena.solutions.readers import register

ADAPTER_FILE = "gpumode_adapter.py"
META_INPUT = "gpumode_data"
"""The name of the last input of an imported GPU MODE problem: how to rebuild `data`."""
FORMAT = "gpuarena.gpumode-data/1"

_DEFINES_CUSTOM_KERNEL = re.compile(r"^(async\s+)?def\s+custom_kernel\s*\(|^custom_kernel\s*=", re.MULTILINE)
_DEFINES_SOLVE = re.compile(r"^(async\s+)?def\s+solve\s*\(|^solve\s*=", re.MULTILINE)
_DEFINES_MODEL_NEW = re.compile(r"^class\s+ModelNew\b", re.MULTILINE)

RUNTIME = '''\
# -- shared by the problem's glue and the solution's adapter (interop/gpumode_solution.py) --
import collections as _collections
import dataclasses as _dataclasses
import types as _types

import torch as _torch

_SCALAR_TYPES = (bool, int, float, str, type(None))
_CARRIED = ("gpuarena carries tensors, numbers, strings, None, and tuples, lists, dicts, dataclasses, "
            "namedtuples and SimpleNamespaces of them")
CONSTANT = "constant"
"""An input that is one value everywhere travels as (CONSTANT, shape, dtype, value, device): constant_of(),
the device added by make_inputs (device_of)."""
OWN_CLASSES = {}
"""The task's own dataclasses and namedtuples by name, where its files are at hand (the glue and
the importer's probe fill it); elsewhere (the adapter) a class of the same name and fields
stands in, made once (_STAND_INS)."""
_STAND_INS = {}


def _own_methods(cls, names):
    """What a dataclass or namedtuple defines beyond its fields: methods, properties and
    __post_init__ (a stand-in rebuilt from the fields alone would lack them)."""
    found = []
    for klass in cls.__mro__[:-1]:
        if klass is tuple:
            continue
        for name, attr in vars(klass).items():
            own = name == "__post_init__" or (
                not name.startswith("_")
                and (callable(attr) or isinstance(attr, (property, classmethod, staticmethod)))
            )
            if own and name not in found and name not in names:
                found.append(name)
    return found


def _object_node(value, tensors):
    """A dataclass, namedtuple or SimpleNamespace as ("o", kind, class name, frozen, ((field,
    node), ...)); TypeError, naming why, for one that cannot be rebuilt from its fields."""
    cls = type(value)
    if isinstance(value, tuple):
        kind, names = "namedtuple", cls._fields
    elif cls is _types.SimpleNamespace:
        kind, names = "namespace", tuple(vars(value))
    else:
        kind, fields = "dataclass", _dataclasses.fields(value)
        names = tuple(f.name for f in fields)
        if any(not f.init for f in fields):
            raise TypeError(f"data holds a {cls.__name__}, a dataclass with fields its __init__ does not take: "
                            "gpuarena rebuilds a dataclass from its fields")
        extra = [k for k in getattr(value, "__dict__", {}) if k not in names]
        if extra:
            raise TypeError(f"data holds a {cls.__name__}, a dataclass with attributes beyond its fields "
                            f"({', '.join(extra)}): gpuarena rebuilds a dataclass from its fields")
    own = _own_methods(cls, names) if kind != "namespace" else []
    if own:
        raise TypeError(f"data holds a {cls.__name__}, a {kind} with methods of its own ({', '.join(own)}): "
                        "the solution's side rebuilds it from its fields alone, without the task's files")
    frozen = kind == "dataclass" and bool(cls.__dataclass_params__.frozen)
    return ("o", kind, cls.__name__, frozen, tuple((k, _flatten(getattr(value, k), tensors)) for k in names))


def _flatten(value, tensors):
    if isinstance(value, _torch.Tensor):
        tensors.append(value)
        return ("t", len(tensors) - 1)
    if (isinstance(value, tuple) and hasattr(type(value), "_fields")) or type(value) is _types.SimpleNamespace or (
        _dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return _object_node(value, tensors)
    if isinstance(value, (tuple, list)):
        return ("tuple" if isinstance(value, tuple) else "list", tuple(_flatten(v, tensors) for v in value))
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("data holds a dict with keys other than strings")
        return ("dict", tuple((k, _flatten(v, tensors)) for k, v in value.items()))
    if isinstance(value, _SCALAR_TYPES):
        return ("s", value)
    what = ("a torch.nn.Module, with state and methods of its own that the solution's side cannot rebuild "
            "without the task's files" if isinstance(value, _torch.nn.Module) else "not one of these")
    raise TypeError(f"data holds a {type(value).__name__} ({what}): {_CARRIED}")


def constant_of(tensor):
    """(CONSTANT, shape, dtype, value) where every element of tensor (more than one) is one value
    (a mask of ones, say), else None."""
    if tensor.numel() < 2:
        return None
    first = tensor.reshape(-1)[0]
    if not bool((tensor == first).all()):
        return None
    return (CONSTANT, tuple(tensor.shape), str(tensor.dtype).removeprefix("torch."), first.item())


def _object_class(kind, name, frozen, names):
    if kind == "namespace":
        return _types.SimpleNamespace
    own = OWN_CLASSES.get(name)
    if kind == "dataclass" and _dataclasses.is_dataclass(own):
        if tuple(f.name for f in _dataclasses.fields(own)) == names:
            return own
    elif kind == "namedtuple" and isinstance(own, type) and getattr(own, "_fields", None) == names:
        return own
    key = (kind, name, frozen, names)
    if key not in _STAND_INS:
        _STAND_INS[key] = (_dataclasses.make_dataclass(name, names, frozen=frozen) if kind == "dataclass"
                           else _collections.namedtuple(name, names))
    return _STAND_INS[key]


def _marked(node, tensors, buffers, renumber):
    kind = node[0]
    if kind == "t":
        i = node[1]
        if i in buffers:
            t = tensors[i]
            return ("b", tuple(t.shape), str(t.dtype).removeprefix("torch."), buffers[i])
        return ("t", renumber[i])
    if kind in ("tuple", "list"):
        return (kind, tuple(_marked(c, tensors, buffers, renumber) for c in node[1]))
    if kind == "dict":
        return (kind, tuple((k, _marked(c, tensors, buffers, renumber)) for k, c in node[1]))
    if kind == "o":
        return node[:4] + (tuple((k, _marked(c, tensors, buffers, renumber)) for k, c in node[4]),)
    return node


def flatten(data, buffers=None):
    """(tensors, layout) of GPU MODE's data; the tensors at the indices in buffers (index ->
    "zeros" or "empty") become buffer leaves, made afresh on every call instead of passed."""
    tensors = []
    layout = _flatten(data, tensors)
    if not buffers:
        return tensors, layout
    kept, renumber = [], {}
    for i, t in enumerate(tensors):
        if i not in buffers:
            renumber[i] = len(kept)
            kept.append(t)
    return kept, _marked(layout, tensors, buffers, renumber)


def rebuild(layout, tensors, device):
    """GPU MODE's data again, from a layout and the tensors; buffers and constant inputs made on
    device."""
    kind = layout[0]
    if kind == "t":
        value = tensors[layout[1]]
        if isinstance(value, tuple):  # (CONSTANT, shape, dtype, value): constant_of()
            return _torch.full(value[1], value[3], dtype=getattr(_torch, value[2]), device=device)
        return value
    if kind == "b":
        make = _torch.zeros if layout[3] == "zeros" else _torch.empty
        return make(layout[1], dtype=getattr(_torch, layout[2]), device=device)
    if kind == "s":
        return layout[1]
    if kind == "tuple":
        return tuple(rebuild(c, tensors, device) for c in layout[1])
    if kind == "list":
        return [rebuild(c, tensors, device) for c in layout[1]]
    if kind == "dict":
        return {k: rebuild(c, tensors, device) for k, c in layout[1]}
    if kind == "o":
        values = {k: rebuild(c, tensors, device) for k, c in layout[4]}
        return _object_class(layout[1], layout[2], layout[3], tuple(values))(**values)
    raise ValueError(f"unknown layout node {kind!r}")


def output_spec(value):
    """What ref_kernel returns, as a plain tuple: tensors, numbers, tuples and lists of them."""
    if isinstance(value, _torch.Tensor):
        return ("t",)
    if isinstance(value, bool):
        return ("n", "bool")
    if isinstance(value, int):
        return ("n", "int64")
    if isinstance(value, float):
        return ("n", "float64")
    if isinstance(value, (tuple, list)):
        return ("tuple" if isinstance(value, tuple) else "list", tuple(output_spec(v) for v in value))
    raise TypeError(f"returns a {type(value).__name__}: gpuarena compares tensors, numbers and tuples of them")


def _walk_outputs(value, spec, device, flat):
    if spec[0] == "t":
        flat.append(value)
    elif spec[0] == "n":
        flat.append(value if isinstance(value, _torch.Tensor)
                    else _torch.tensor(value, dtype=getattr(_torch, spec[1]), device=device))
    else:
        if not isinstance(value, (tuple, list)) or len(value) != len(spec[1]):
            got = f"a {type(value).__name__}" + (f" of {len(value)}" if isinstance(value, (tuple, list)) else "")
            raise TypeError(f"returned {got}; the reference returns a {spec[0]} of {len(spec[1])}")
        for item, child in zip(value, spec[1]):
            _walk_outputs(item, child, device, flat)


def outputs(value, spec, device):
    """A result as the flat tuple of tensors the harness compares (numbers as 0-dim tensors).
    No nested function here or in what the calls run: a closure that calls itself is a
    reference cycle, which kept every call's outputs alive until the collector ran (never,
    inside a timed block), so each call paid for fresh memory."""
    flat = []
    _walk_outputs(value, spec, device, flat)
    return tuple(flat)


def _restructured(spec, items):
    if spec[0] == "t":
        return next(items)
    if spec[0] == "n":
        return next(items).item()
    parts = [_restructured(child, items) for child in spec[1]]
    return tuple(parts) if spec[0] == "tuple" else parts


def restructure(flat, spec):
    """The inverse of outputs(): the flat tuple of tensors back in ref_kernel's shape (numbers
    as Python numbers), for the task's check_implementation."""
    return _restructured(spec, iter(flat))


def device_of(tensors):
    """The device of the first tensor (constant inputs, plain tuples, are passed over); where every
    input is a constant (eigh's zero matrix), the device its draw was made for, which the constant
    carries as its fifth element (make_inputs adds it: without it, data was rebuilt on the CPU and
    a GPU task's outputs came back there)."""
    for t in tensors:
        if isinstance(t, _torch.Tensor):
            return t.device
    for t in tensors:
        if isinstance(t, tuple) and len(t) == 5 and t[0] == CONSTANT:
            return _torch.device(t[4])
    return _torch.device("cpu")
'''

_ADAPTER = """\
# gpuarena: adapter added by gpuarena (interop/gpumode_solution.py) to a GPU MODE submission;
# not part of that file. It rebuilds GPU MODE's `data` from the problem's inputs, calls
# custom_kernel(data) and returns its result as the reference's tuple of tensors.
import importlib.util as _util
import sys as _sys
import types as _types
import typing as _typing
from pathlib import Path as _Path

SUBMISSION_FILE = {submission_file!r}
_FORMAT = {format!r}

{runtime}

if "task" not in _sys.modules and _util.find_spec("task") is None:
    # submissions import their type names from GPU MODE's task.py, which is not in the worker:
    # a stand-in module defining what GPU MODE's task.py files define (input_t and output_t,
    # TypeVars, and TestSpec, a TypedDict), and nothing else; a module that answered every
    # name would answer __file__ too, and break inspect.getmodule (torch.compile calls it)
    _task = _types.ModuleType("task", "gpuarena's stand-in for GPU MODE's task.py (interop/gpumode_solution.py)")
    _task.input_t = _typing.TypeVar("input_t")
    _task.output_t = _typing.TypeVar("output_t")
    _task.TestSpec = _typing.TypedDict("TestSpec", {{}}, total=False)
    _task.TestSpec.__module__ = "task"
    _sys.modules["task"] = _task

_spec = _util.spec_from_file_location("gpumode_submission_" + __name__, _Path(__file__).parent / SUBMISSION_FILE)
_module = _util.module_from_spec(_spec)
_sys.modules[_spec.name] = _module  # as an import would (Triton and pickling look there)
_spec.loader.exec_module(_module)
custom_kernel = _module.custom_kernel


def solve(*args):
    meta = args[-1] if args else None
    if not isinstance(meta, tuple) or len(meta) != 3 or meta[0] != _FORMAT:
        raise TypeError(f"{{SUBMISSION_FILE}} is a GPU MODE submission (it defines custom_kernel): it solves problems "
                        "imported with `gpuarena import gpumode`, whose last input says how to rebuild data")
    tensors = args[:-1]
    _, layout, spec = meta
    device = device_of(tensors)
    # without autograd, as the reference's glue calls ref_kernel: a submission that builds
    # nn.Parameters (trimul's) would otherwise record a graph holding every activation of every
    # call whose output the harness keeps (102 GiB of an H200), and pay for recording it
    with _torch.no_grad():
        return outputs(custom_kernel(rebuild(layout, tensors, device)), spec, device)
"""


def is_custom_kernel_file(source: str) -> bool:
    """Whether a one-file solution is a GPU MODE submission rather than a solve() (or ModelNew)."""
    return (
        bool(_DEFINES_CUSTOM_KERNEL.search(source))
        and not _DEFINES_SOLVE.search(source)
        and not _DEFINES_MODEL_NEW.search(source)
    )


def adapter_source(submission_file: str) -> str:
    """The adapter's text for a submission of this name (beside it in the solution)."""
    return _ADAPTER.format(submission_file=submission_file, format=FORMAT, runtime=RUNTIME)


class GpuModeReader:
    """A GPU MODE submission (custom_kernel(data), no solve): it runs unmodified, through an
    adapter beside it that rebuilds `data` from the inputs (tried after KernelBench's)."""

    kind: Literal["source"] = "source"
    name = "gpumode"
    order = 20

    def accepts(self, filename: str, source: str) -> bool:
        return is_custom_kernel_file(source) and filename != ADAPTER_FILE

    def load(self, filename: str, source: str) -> Solution:
        return adapted_solution(
            filename,
            source,
            ADAPTER_FILE,
            adapter_source(filename),
            "a GPU MODE submission defines custom_kernel(data)",
        )


register(GpuModeReader())
