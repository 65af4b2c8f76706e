"""GPU MODE tasks whose ref_kernel needs CUDA, imported on a machine without it (see
interop/gpumode.py; a reference.py importing a package not installed here: gpumode_needs.py).

A ref_kernel that fails on the CPU after generate_input's data was made there (a `.cuda()` in
it, an op with no CPU kernel: torch._scaled_mm on nvfp4 data) is run once more on the meta
device, which has shapes and dtypes but no values: that gives what it returns and the tensors
of data it writes into (their version counters move), which is all the problem folder needs.
Its workloads then run on CUDA only; the values, and the task's check_implementation on them,
are left to `gpuarena check --device cuda`, and the import says so (gpu_only_finding).

The same holds on a GPU that cannot run ref_kernel (beyond_this_gpu: cuBLAS has no nvfp4 matmul
on an H200): the task is written for a GPU that can, marked unchecked, and says so
(needs_another_gpu)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarena.interop.gpumode_probe import _clone
from gpuarena.interop.gpumode_task import _verdict

if TYPE_CHECKING:
    import torch

    from gpuarena.interop.gpumode_task import Task


def meta_probe(task: Task, data: Any, rt: dict[str, Any]) -> tuple[Any, dict[int, str]]:
    """ref_kernel run on data moved to the meta device (its CUDA devices made meta too): what it
    returns (meta tensors) and the tensors of data it writes into, as output buffers (index ->
    "zeros" where generate_input made them zero, else "empty"). Raises what ref_kernel raises."""
    import torch

    meta = torch.device("meta")
    tensors, layout = rt["flatten"](data)
    copy = _clone(rt["rebuild"](layout, [t.to(meta) for t in tensors], meta))
    moved, _ = rt["flatten"](copy)
    versions = [t._version for t in moved]
    # the mode alone, not on_device(): ref_kernel's generators, if any, stay where they are. What
    # it makes on the default device is made on meta too, not for real on the host: amd/moe's builds
    # its experts' layers at full size there (up to 99 of 7168 x 2048 floats) before it swaps in the
    # data's weights (its probe still stops at torch's bincount, which has no meta kernel)
    with torch.no_grad(), meta, rt["_OnDevice"](meta):
        out = task.namespace["ref_kernel"](copy)
    written = [i for i, (t, v) in enumerate(zip(moved, versions)) if t._version != v]
    buffers: dict[int, str] = {}
    for i in written:
        try:
            zero = not bool(tensors[i].any())
        except (RuntimeError, TypeError):  # a dtype with no CPU any() (fp4): made empty
            zero = False
        buffers[i] = "zeros" if zero else "empty"
    return out, buffers


META_PROBED = (
    "the outputs and the output buffers were read from ref_kernel on the meta device (shapes and "
    "dtypes, no values); the task's check_implementation was not run"
)
"""What the import says of a task whose outputs it read on the meta device only."""
HOST_OUT_OF_MEMORY = re.compile(r"DefaultCPUAllocator|can't allocate memory|Cannot allocate memory")
"""torch's words for the host's memory running out (a GPU's, "CUDA out of memory", is not one)."""


def own_output_verdict(
    task: Task, data: Any, out: Any, gpu_sized: bool, notes: list[str], name: str
) -> tuple[bool, str]:
    """The task's check_implementation on ref_kernel's own output of the first probed entry: (ok,
    why not). A checker that cannot read it rejects it; one that runs out of the host's memory
    on a GPU-sized entry (amd/moe's calls ref_kernel again, on 5.8 GB of layers) has not judged
    it: that is left to the entry's first run on a GPU, and the notes say so. A GPU running out
    is no such case: there the import is that first run."""
    try:
        return _verdict(task.namespace["check_implementation"](_clone(data), _clone(out)))
    except Exception as exc:
        if gpu_sized and (isinstance(exc, MemoryError) or HOST_OUT_OF_MEMORY.search(str(exc))):
            notes.append(f"check_implementation ran out of memory here on {name}, a GPU-sized entry: a GPU checks it")
            return True, ""
        return False, f"it raised {type(exc).__name__}: {exc}"


def gpu_only_finding(why: str, out_dir: Path) -> str:
    """What the import says of a task whose every workload runs on CUDA only, imported on the CPU:
    written marked unchecked, checked by its first run on a GPU (problem_pending.py)."""
    return (
        f"every workload runs on a GPU only ({why}), so it was not checked here: it is written marked "
        f"`unchecked` and its first run on a GPU checks it (or `gpuarena check {out_dir} --device cuda` on a "
        "GPU machine, or import it there with --check-device cuda)"
    )


BEYOND_THIS_GPU = re.compile(
    r"NOT_SUPPORTED|no kernel image is available|not supported on (this|the current) (device|GPU|architecture)"
    r"|requires? (a )?(compute capability|sm_?\d+|SM ?\d+)",
    re.I,
)
"""The words of an error that says this GPU lacks what the reference needs (cuBLAS has no nvfp4
matmul before sm_100: GPU MODE's nvfp4 tasks on an H200), not that the reference is wrong."""


def beyond_this_gpu(error: str) -> bool:
    return bool(BEYOND_THIS_GPU.search(error))


def needs_another_gpu(error: str, device: torch.device, out_dir: Path) -> str:
    """What the import says of a task whose ref_kernel this GPU cannot run: its outputs read on the
    meta device, written marked unchecked, checked by its first run on a GPU that runs it."""
    import torch

    name = torch.cuda.get_device_name(device) if torch.cuda.is_available() else str(device)
    major, minor = torch.cuda.get_device_capability(device) if torch.cuda.is_available() else (0, 0)
    return (
        f"ref_kernel needs another GPU than this {name} (compute capability {major}.{minor}): it raised "
        f"{error[:200]}; the outputs were read on the meta device, so it was not checked here: it is written "
        f"marked `unchecked` and its first run on a GPU that runs it checks it (or `gpuarena check {out_dir} "
        "--device cuda` there); on this GPU that check fails and no verdict is given"
    )
