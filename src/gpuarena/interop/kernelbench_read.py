"""KernelBench into gpuarena, reading: a KernelBench problem file parsed, run and probed
(its sizes, init inputs, outputs and a CPU-sized workload) for interop/kernelbench.py."""

from __future__ import annotations

import ast
import inspect
import keyword
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuarena.interop.kernelbench_forward import RandomForward, probed_forward
from gpuarena.interop.kernelbench_hf import (
    AXIS_PREFIX,
    HUB_MODELS,
    HubModel,
    HubModelUnknown,
    decode_init,
    encode_init,
    hub_axes,
    offline_hub,
)
from gpuarena.interop.kernelbench_solution import INIT_INPUT, is_model_new_file
from gpuarena.interop.outcome import SourceError

SEED = 42
"""KernelBench's eval seed (seed_num): parameters are made from it on both sides."""
MARKER = "# ---- gpuarena: end of the KernelBench problem file ----"
CPU_MAX_ELEMENTS = 1 << 20
"""A workload whose inputs and outputs hold at most this many elements runs on the CPU,"""
CPU_MAX_PARAMETERS = 1 << 25
"""if its model's parameters and buffers hold at most this many. Counted with the data, the
weights of a whole model kept level 3 off the CPU at any size (ResNet-18's 11.7M at a batch of
2 at 224², a forward of about 0.1 s on 2 cores), and they do not shrink with the batch."""
MIN_SHRINK = 16
"""Sizes below this are kept when a CPU workload is derived (kernel sizes, strides, groups, dims),
but a batch's, which halves down to 1: level 3's MobileNets take a batch of 10 at a fixed 224²,
and kept at 10 their input alone was over the CPU's cap."""


def _batch_like(name: str) -> bool:
    """A size that counts independent samples (batch_size, batch, n_batch): any value is valid."""
    return "batch" in name.lower()


_GLUE_NAMES = {"reference", "make_inputs"}


class KernelBenchError(SourceError):
    """A KernelBench file that cannot be imported; the message names the file and why."""


class RandomForwardError(KernelBenchError):
    """Its forward differs from call to call (kernelbench_forward.RandomForward), at any size."""


# -- reading the file ---------------------------------------------------------------------------


_MAX_SIZE = 1 << 62
"""Sizes above this are not read as sizes (and `**` is not evaluated past it)."""


def constant_int(node: ast.expr) -> int | None:
    """The value of a constant integer expression (integers, + - * // % **, unary + -), or
    None: for names, calls, floats and anything else, and past _MAX_SIZE in magnitude."""
    if isinstance(node, ast.Constant):
        return node.value if type(node.value) is int and abs(node.value) <= _MAX_SIZE else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = constant_int(node.operand)
        return None if value is None else (value if isinstance(node.op, ast.UAdd) else -value)
    if not isinstance(node, ast.BinOp):
        return None
    left, right = constant_int(node.left), constant_int(node.right)
    if left is None or right is None:
        return None
    op = node.op
    if isinstance(op, ast.Pow):
        if not 0 <= right <= 64 or (abs(left) > 1 and right * (abs(left).bit_length() - 1) > 62):
            return None
        result = left**right
    elif isinstance(op, ast.Add):
        result = left + right
    elif isinstance(op, ast.Sub):
        result = left - right
    elif isinstance(op, ast.Mult):
        result = left * right
    elif isinstance(op, (ast.FloorDiv, ast.Mod)) and right != 0:
        result = left // right if isinstance(op, ast.FloorDiv) else left % right
    else:
        return None
    return result if abs(result) <= _MAX_SIZE else None


def _size_slots(target: ast.expr, value: ast.expr) -> list[tuple[str, ast.expr]]:
    """(axis name, expression) for each size one assignment target gets: `n = EXPR` -> n;
    `n = (E0, E1)` -> n_0, n_1; `a, b = E0, E1` -> a, b. Kept in step with the glue's
    substitution (with_sizes), which puts values in these same places."""
    if isinstance(target, ast.Name):
        if isinstance(value, (ast.Tuple, ast.List)):
            return [(f"{target.id}_{i}", element) for i, element in enumerate(value.elts)]
        return [(target.id, value)]
    if (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and all(isinstance(t, ast.Name) for t in target.elts)
    ):
        return [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
    return []


def size_constants(tree: ast.Module) -> dict[str, int]:
    """The file's sizes: top-level names assigned once, to a non-negative constant integer
    expression (`N = 2048 * 2`, `dim = 16384 // 4`, `a = b = 256`), and the elements of
    tuples so assigned (`kernel_size = (3, 5)` -> kernel_size_0, kernel_size_1). Constants
    computed from other names (`M = 4 * N`) are not sizes: the file computes them again from
    the sizes put in place, so they follow every workload's sizes."""
    counts: dict[str, int] = {}
    slots: list[str] = []  # every place a size could be put: one name, one place
    found: list[tuple[str, str, int]] = []  # (assigned name, axis, value)
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    counts[name.id] = counts.get(name.id, 0) + 1
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        for target in targets:
            for axis, expression in _size_slots(target, node.value):
                slots.append(axis)
                value = constant_int(expression)
                if value is not None and value >= 0:
                    owner = target.id if isinstance(target, ast.Name) else axis
                    found.append((owner, axis, value))
    return {
        axis: value
        for owner, axis, value in found
        if counts[owner] == 1 and slots.count(axis) == 1 and (axis == owner or axis not in counts)
    }


def with_sizes(tree: ast.Module, sizes: dict[str, int]) -> ast.Module:
    """The module with sizes put in place: each top-level assignment that gives one of them
    (where size_constants reads it) has that expression replaced by the size's value, and a
    chained one (`a = b = 256`) is split, one assignment a name."""
    result: ast.Module = substitute_sizes(tree, sizes)
    return result


def substitute_sizes(tree, sizes):
    """with_sizes, self-contained and unannotated: the glue in reference.py holds this
    function's own source (kernelbench.py embeds it), so the import and the problem agree."""
    import ast as _ast
    import copy as _copy

    def slots(target, value):  # (size name, index in the value's tuple or None), as size_constants reads them
        if isinstance(target, _ast.Name):
            if isinstance(value, (_ast.Tuple, _ast.List)):
                return [(f"{target.id}_{i}", i) for i in range(len(value.elts))]
            return [(target.id, None)]
        if (
            isinstance(target, (_ast.Tuple, _ast.List))
            and isinstance(value, (_ast.Tuple, _ast.List))
            and len(target.elts) == len(value.elts)
            and all(isinstance(t, _ast.Name) for t in target.elts)
        ):
            return [(t.id, i) for i, t in enumerate(target.elts)]
        return []

    body = []
    for node in tree.body:
        if isinstance(node, _ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, _ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            body.append(node)
            continue
        found = [[(i, sizes[name]) for name, i in slots(t, node.value) if name in sizes] for t in targets]
        if not any(found):
            body.append(node)
            continue
        for target, places in zip(targets, found):
            value = _copy.deepcopy(node.value)
            for i, size in places:
                if i is None:
                    value = _ast.copy_location(_ast.Constant(size), value)
                else:
                    value.elts[i] = _ast.copy_location(_ast.Constant(size), value.elts[i])
            if isinstance(node, _ast.AnnAssign):
                new = _ast.AnnAssign(target, node.annotation, value, node.simple)
            else:
                new = _ast.Assign([target], value)
            body.append(_ast.fix_missing_locations(_ast.copy_location(new, node)))
    tree.body = body
    return tree


def uses_transformers(source: str) -> bool:
    """Whether the file may build Hugging Face models (level 4): then it runs under offline_hub."""
    return "transformers" in source


def _run_file(
    source: str, path: Path, sizes: dict[str, int] | None = None, used: list[str] | None = None
) -> dict[str, Any]:
    """The file run (at these sizes), its hub models built offline; `used` gets their names."""
    tree = ast.parse(source, filename=str(path))
    if sizes:
        tree = with_sizes(tree, sizes)
    namespace: dict[str, Any] = {"__name__": "kernelbench_problem", "__file__": str(path)}
    with offline_hub(sizes, used=used, enabled=uses_transformers(source)):
        exec(compile(tree, str(path), "exec"), namespace)  # the user's own problem file
    return namespace


@dataclass
class _File:
    path: Path
    source: str
    sizes: dict[str, int]
    namespace: dict[str, Any]
    summary: str
    hub: dict[str, HubModel] = field(default_factory=dict)
    """The Hugging Face models the file names (level 4), from gpuarena's table; their sizes
    are among `sizes` (hf_FIELD)."""
    seeded_calls: bool = False
    """Its forward draws from torch's generator: judged seeded before every call (found by a
    forward on a real device, kernelbench_forward.probed_forward)."""


def _names_from_forward(model: Any, count: int) -> list[str]:
    try:
        params = list(inspect.signature(model.forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    named = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    ok = (
        len(named) >= count
        and all(n.isidentifier() and not keyword.iskeyword(n) for n in named[:count])
        and not ({INIT_INPUT, *_GLUE_NAMES} & set(named[:count]))
        and not any(n.startswith("_") for n in named[:count])
    )
    return named[:count] if ok else [f"input{i}" for i in range(count)]


def read_file(path: Path) -> _File:
    """Parse and run a KernelBench problem file; its Model, get_inputs and get_init_inputs checked."""
    import torch

    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KernelBenchError(path, f"cannot be read: {exc}") from None
    if MARKER in source:
        raise KernelBenchError(
            path,
            "already holds gpuarena's marker line (is it an imported reference.py?)",
            "give the original KernelBench file",
        )
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise KernelBenchError(path, f"is not valid Python: line {exc.lineno}: {exc.msg}") from None
    if is_model_new_file(source):  # told before running it: a solution may compile CUDA at import
        raise KernelBenchError(
            path,
            "defines ModelNew and no Model: it is a KernelBench solution, not a problem",
            "run it with `gpuarena run PROBLEM FILE` against the imported problem",
        )
    used: list[str] = []
    try:
        namespace = _run_file(source, path, used=used)
    except HubModelUnknown as exc:  # said in one line, naming the model
        raise KernelBenchError(path, str(exc), "give a file whose models are in gpuarena's table") from None
    except Exception as exc:  # the file's own error, reported with its name
        raise KernelBenchError(path, f"running it failed: {type(exc).__name__}: {exc}") from None
    model = namespace.get("Model")
    if not (isinstance(model, type) and issubclass(model, torch.nn.Module)):
        raise KernelBenchError(
            path,
            "defines no class Model(nn.Module)",
            "a KernelBench problem file defines Model, get_inputs() and get_init_inputs()",
        )
    for required in ("get_inputs", "get_init_inputs"):
        if not callable(namespace.get(required)):
            raise KernelBenchError(
                path,
                f"defines no function {required}()",
                "a KernelBench problem file defines Model, get_inputs() and get_init_inputs()",
            )
    if "ModelNew" in namespace:
        raise KernelBenchError(
            path,
            "defines ModelNew: it is a solution, not a problem",
            "run it with `gpuarena run PROBLEM FILE` against the imported problem",
        )
    sizes = size_constants(tree)
    hub = {name: HUB_MODELS[name] for name in dict.fromkeys(used)}
    clashing = sorted(name for name in sizes if hub and name.startswith(AXIS_PREFIX))
    if clashing:
        raise KernelBenchError(
            path, f"has top-level constants named {', '.join(clashing)}: {AXIS_PREFIX}* names the config's sizes"
        )
    sizes.update(hub_axes(hub))
    doc = inspect.getdoc(model) or ""
    summary = doc.strip().splitlines()[0].strip() if doc.strip() else f"KernelBench problem {path.stem}"
    return _File(path, source, sizes, namespace, summary, hub)


def _init_args(namespace: dict[str, Any], path: Path) -> tuple[Any, ...]:
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        try:
            args = namespace["get_init_inputs"]()
        except Exception as exc:
            raise KernelBenchError(path, f"get_init_inputs() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(args, (list, tuple)):
        raise KernelBenchError(path, f"get_init_inputs() returned a {type(args).__name__}, not a list")
    args = encode_init(args)  # a transformers config travels as its JSON (kernelbench_hf)

    def plain(value: Any) -> bool:
        if isinstance(value, (list, tuple)):
            return all(plain(v) for v in value)
        return value is None or isinstance(value, (bool, int, float, str))

    for i, value in enumerate(args):
        if not plain(value):
            raise KernelBenchError(
                path,
                f"get_init_inputs()[{i}] is a {type(value).__name__}: gpuarena cannot carry init inputs "
                "other than numbers, strings, None, transformers configs and lists or tuples of them yet",
            )
    return tuple(args)


@dataclass
class _Probe:
    elements: int
    """Of the inputs and outputs."""
    outputs: list[tuple[list[int], str]]
    n_inputs: int
    parameters: int = 0
    """Of the model's parameters and buffers."""

    def fits_the_cpu(self) -> bool:
        return self.elements <= CPU_MAX_ELEMENTS and self.parameters <= CPU_MAX_PARAMETERS

    def load(self) -> float:
        """How far over the CPU's caps (1 at the larger of them)."""
        return max(self.elements / CPU_MAX_ELEMENTS, self.parameters / CPU_MAX_PARAMETERS)


def _flatten_outputs(out: Any, path: Path) -> list[Any]:
    import torch

    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    for i, o in enumerate(outs):
        if not isinstance(o, torch.Tensor):
            raise KernelBenchError(
                path, f"forward() returns a {type(o).__name__} (output {i}): gpuarena compares tensors only"
            )
    return outs


def _probe(file: _File, sizes: dict[str, int], device: str, estimate: bool = False) -> _Probe:
    """Build the model and run forward at these sizes: on "meta" (shapes only, any size) or
    on the "cpu" (seeded as the problem will be). `estimate`: scalars read on meta are zero
    (kernelbench_forward), for a forward that branches on its data."""
    import torch

    namespace = _run_file(file.source, file.path, sizes) if sizes != file.sizes else file.namespace
    args = _init_args(namespace, file.path)
    with torch.random.fork_rng(devices=[]), torch.no_grad(), torch.device(device):
        torch.manual_seed(SEED)
        try:
            inputs = list(namespace["get_inputs"]())
        except Exception as exc:
            raise KernelBenchError(file.path, f"get_inputs() raised {type(exc).__name__}: {exc}") from None
        with offline_hub(sizes, enabled=uses_transformers(file.source)):
            model = namespace["Model"](*decode_init(args))
        try:
            outs, seeded = probed_forward(lambda: _flatten_outputs(model(*inputs), file.path), device, estimate)
        except RandomForward as exc:
            raise RandomForwardError(file.path, str(exc)) from None
    file.seeded_calls |= seeded
    tensors = [t for t in inputs if isinstance(t, torch.Tensor)] + outs
    weights = list(model.parameters()) + list(model.buffers())
    for i, value in enumerate(inputs):
        if not isinstance(value, (torch.Tensor, bool, int, float)):
            raise KernelBenchError(
                file.path, f"get_inputs()[{i}] is a {type(value).__name__}: gpuarena passes tensors and numbers only"
            )
    return _Probe(
        sum(t.numel() for t in tensors),
        [(list(o.shape), str(o.dtype).removeprefix("torch.")) for o in outs],
        len(inputs),
        sum(t.numel() for t in weights),
    )


def _load(file: _File, sizes: dict[str, int], estimate: bool = False) -> float | None:
    """How far these sizes are over the CPU's caps (_Probe.load, on meta), or None where they do
    not make a valid model."""
    try:
        return _probe(file, sizes, "meta", estimate).load()
    except Exception:  # a shape the file does not allow, or an op without meta support
        return None


def _input_elements(file: _File) -> int:
    """Elements of get_inputs() at the file's sizes, made on meta (a huge count if that fails)."""
    import torch

    try:
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            values = file.namespace["get_inputs"]()
        return sum(v.numel() for v in values if isinstance(v, torch.Tensor))
    except Exception:
        return 1 << 62


def _input_load(file: _File, sizes: dict[str, int]) -> float | None:
    """get_inputs()'s elements at these sizes over the data cap (made on meta: no forward), or
    None where they do not run."""
    import torch

    try:
        namespace = _run_file(file.source, file.path, sizes) if sizes != file.sizes else file.namespace
        with torch.random.fork_rng(devices=[]), torch.device("meta"):
            values = namespace["get_inputs"]()
        return sum(v.numel() for v in values if isinstance(v, torch.Tensor)) / CPU_MAX_ELEMENTS
    except Exception:
        return None
