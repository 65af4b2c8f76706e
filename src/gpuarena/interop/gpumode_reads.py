"""Which tensors of a GPU MODE task's data ref_kernel never reads (see interop/gpumode.py).

GPU MODE tasks carry tensors for submissions only (nvfp4's scale factors rearranged into a
blocked layout, beside the plain ones ref_kernel reads). Such an input is no flaw, though no
output depends on it, which `gpuarena check` would otherwise call degenerate: the glue names it
in `unread_inputs(axes)`. What is unread is seen, not guessed from values: ref_kernel runs once
under modes that record every input touched, by its storage (so a view of it counts), which
works alike on the CPU, on CUDA and on the meta device, where values are unknown (the nvfp4
tasks imported on a machine without a GPU, interop/gpumode_gpu.py). An op that only makes a
view, and a query of shape, dtype or device, reads nothing; any other op does, and so does any
way out of torch (`tolist`, `numpy`, `data_ptr`: no op of torch's dispatcher sees those, the
torch-function level does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuarena.interop.gpumode_probe import _clone

if TYPE_CHECKING:
    from gpuarena.interop.gpumode_task import Task

METADATA = frozenset(
    {
        "__len__",
        "__hash__",
        "dim",
        "ndimension",
        "size",
        "numel",
        "nelement",
        "stride",
        "storage_offset",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "is_signed",
        "get_device",
        "type",
    }
)
"""Tensor methods that give a Python value but read no values of the tensor (its properties,
`shape`, `dtype`, `device`, read none either, but for `__cuda_array_interface__`)."""


def _key(tensor: Any) -> int:
    try:
        return int(tensor.untyped_storage()._cdata)  # one storage, its views included
    except Exception:  # a tensor without storage (sparse): itself
        return id(tensor)


def _name(func: Any) -> str:
    name = str(getattr(func, "__name__", ""))
    if name == "__get__":  # a property: its own name
        owner = getattr(func, "__self__", None)
        name = "." + str(getattr(owner, "__name__", None) or getattr(getattr(owner, "fget", None), "__name__", ""))
    return name


def unread(task: Task, data: Any, rt: dict[str, Any], meta: bool = False) -> set[int] | None:
    """Indices (among flatten(data)'s tensors) of those no op of ref_kernel(data) reads; on the
    meta device where `meta` (data moved there, CUDA named meta as in meta_probe). None where
    ref_kernel fails under the recording (torch.compile may): nothing is then said unread."""
    import contextlib

    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    tensors, layout = rt["flatten"](data)
    if meta:
        device = torch.device("meta")
        data = rt["rebuild"](layout, [t.to(device) for t in tensors], device)
    copy = _clone(data)
    keys = {_key(t): i for i, t in enumerate(rt["flatten"](copy)[0])}
    read: set[int] = set()

    def note(args: Any, kwargs: Any) -> None:
        for value in tree_flatten((args, kwargs or {}))[0]:
            if isinstance(value, torch.Tensor) and (index := keys.get(_key(value))) is not None:
                read.add(index)

    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if not getattr(func, "is_view", False):  # a view's own reads are its storage's
                note(args, kwargs)
            return func(*args, **(kwargs or {}))

    class Exits(TorchFunctionMode):
        """A call that gives back tensors read what its ops read (Ops sees them; a view reads
        nothing); one that gives back anything else may have read values with no op at all."""

        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            result = func(*args, **(kwargs or {}))
            name = _name(func)
            leaves = tree_flatten(result)[0]
            if not (leaves and all(isinstance(v, torch.Tensor) for v in leaves)) and (
                name not in METADATA and (not name.startswith(".") or name == ".__cuda_array_interface__")
            ):
                note(args, kwargs)
            return result

    moved = rt["_OnDevice"](torch.device("meta")) if meta else contextlib.nullcontext()
    try:
        with torch.no_grad(), moved, Exits(), Ops():
            task.namespace["ref_kernel"](copy)
    except Exception:
        return None
    return set(range(len(tensors))) - read


def unread_names(found: set[int] | None, buffers: dict[int, str], names: list[str]) -> list[str]:
    """The input names (names: one per tensor that is not a buffer, in order) of found's tensors;
    a buffer is made on every call, never an input, whether read or not."""
    kept = [i for i in range(len(names) + len(buffers)) if i not in buffers]
    return [names[kept.index(i)] for i in sorted(found or ()) if i not in buffers and i in kept]
