"""The device backend: every device-specific step of a run, behind one small interface.

The supervisor, the worker, the workload session and the timer are written once for every
device: where a step depends on the device (making it current, waiting for its work, making
the caches cold between timed calls, choosing how a call is timed, describing the machine,
measuring its peaks), they ask the run's `Backend`. Whether the device's own counters bound a
claimed time from outside (the device audit) and whether a second per-kernel figure comes
from the hardware (the kernel-duration phase) are the backend's to say too.

There are two backends: the CPU (here) and NVIDIA GPUs through CUDA (`harness/device/nvidia.py`,
which uses the modules named in `NVIDIA_PIECES`). docs/harness.md ("Device backends") says
what a ROCm (HIP) or MetaX (MACA) backend must provide for each method. A PyTorch built for
another vendor still answers to `torch.device("cuda")`, so without the check in `backend_for`
a ROCm machine would start a run and fail deep inside CUPTI; it is refused at the door
instead, naming the gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuarena.errors import GpuarenaError
from gpuarena.harness.device.backend_base import Backend

if TYPE_CHECKING:
    import torch

    from gpuarena.contracts.records import Environment


class CpuBackend(Backend):
    """The host's cores: a call's time is the host clock around it, the worker's CPU time bounds it."""

    name = "cpu"
    timer = "cpu-perf-counter"
    memory_sharing = "shared memory files"
    host_timed = True

    def timing_method(self, asked: str | None, image: bytes | None = None) -> str:
        import torch

        # supervisor and worker time in turn on the same cores: one thread each, so an idle
        # process's spinning thread pool cannot steal cycles from the one being timed
        torch.set_num_threads(1)
        return self.timer

    def describe(self, device: torch.device, state: dict[str, Any] | None = None) -> Environment:
        from gpuarena.harness.device import environment

        return environment.capture_cpu()


CPU = CpuBackend()

NVIDIA_PIECES: dict[str, str] = {
    "device/nvidia.py": "the NVIDIA backend: the methods above, for CUDA devices",
    "device/cupti_timing.py": "each call's device time from CUPTI activity records of the calls' kernels",
    "device/range_timer.py, kernel_duration.py": "each kernel's gpu__time_duration from CUPTI's range profiler and ncu",
    "device/device_audit.py, rounds_audit.py, audit_checks.py, launch/ahead.py": "the GPU's PM counters sampled from outside the "
    "worker (CUPTI PM sampling), started ahead of torch's import",
    "device/cupti_build.py": "building those CUPTI programs against the CUDA toolkit",
    "device/icache_sweep.py": "an instruction-cache sweep kernel compiled with nvcc for the device's architecture",
    "inside/context_ahead.py, inside/triton_key.py": "a worker's CUDA context made through libcuda while it imports "
    "torch, and Triton's first launch made ready meanwhile (its cache key, driver utilities, ptxas's version for the "
    "devices' archs)",
    "cuda_vmm.py, transport.py": "device buffers shared with the worker (cuMem* with POSIX file descriptors, CUDA IPC)",
    "device/peaks.py, device/environment.py": "the device's peaks and identity (nvidia-smi, clocks)",
    "profile/run.py, profile/child.py, profile/ncu_report.py": "profile mode under Nsight Compute",
}
"""The harness's NVIDIA-specific modules (paths under harness/) and what each does: what another vendor's backend replaces."""


class UnsupportedDevice(GpuarenaError):
    """A device the harness has no backend for."""


def backend_named(device_type: str) -> Backend:
    """The backend for a device type (`cpu`, `cuda`), without the vendor checks of `backend_for`:
    for the worker and for work started before torch is imported, once a run has been let in."""
    if device_type.partition(":")[0] == "cpu":
        return CPU
    from gpuarena.harness.device.nvidia import nvidia_backend

    return nvidia_backend()


def worker_setup(device: str) -> dict[str, Any]:
    """Backend.worker_setup for a device named as text, without importing torch (a worker started
    ahead is prepared while the run still imports it)."""
    if device.partition(":")[0] == "cpu":
        return CPU.worker_setup(device)
    from gpuarena.harness.device.nvidia import NvidiaBackend

    return NvidiaBackend.worker_setup(device)


def compiles_triton(device: str) -> bool:
    """Whether Triton compiles kernels for a device named as text, without importing torch: the
    GPU's backend does; on the CPU Triton's interpreter runs them (no cache key, nothing to warm)."""
    return device.partition(":")[0] != "cpu"


def context_ordinal(device: str) -> int | None:
    """The ordinal of the device whose context a worker started ahead makes while it imports
    (inside/context_ahead.py), for a device named as text, without importing torch: a GPU's
    (`cuda` alone is the current device, a fresh process's first); None on the CPU."""
    kind, _, index = device.partition(":")
    if kind == "cpu":
        return None
    return int(index) if index else 0


def device_memory(device: torch.device) -> tuple[int, int]:
    """(free, total) bytes of the device's memory, for a workload's plan (memory_plan.py): on a
    GPU the driver's figures, with torch's cached blocks given back first (the shared buffers
    come from the driver, not from torch's cache); on the host, the memory available to new
    allocations (psutil where it is installed, else /proc/meminfo)."""
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()
        free, total = torch.cuda.mem_get_info(device)
        return int(free), int(total)
    try:
        import psutil
    except ImportError:
        return host_meminfo()
    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def host_meminfo() -> tuple[int, int]:
    """(available, total) bytes of the host's memory from /proc/meminfo."""
    import os

    fields: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                fields[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    total = fields.get("MemTotal") or os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return fields.get("MemAvailable", total), total


def peak_from_now(device: torch.device) -> None:
    """Count the device's allocations' peak from now (CUDA's allocator counts it; the host's does not)."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_past_held(device: torch.device) -> int:
    """What the allocations' peak since `peak_from_now` was past what is held now (0 uncounted)."""
    import torch

    if device.type != "cuda":
        return 0
    return max(0, torch.cuda.max_memory_allocated(device) - torch.cuda.memory_allocated(device))


def out_of_memory(exc: BaseException) -> bool:
    """Whether exc is the device or the host running out of memory: torch's OutOfMemoryError,
    Python's MemoryError, torch's CPU allocator's failure, or the driver's for the shared
    buffers (cuda_vmm.CudaError, CUDA_ERROR_OUT_OF_MEMORY)."""
    import torch

    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "(out of memory)" in text)


def backend_for(device: torch.device) -> Backend:
    """The backend for device, or UnsupportedDevice naming what is missing."""
    import torch

    if device.type == "cpu":
        return CPU
    if device.type != "cuda":
        raise UnsupportedDevice(f"device {device}: gpuarena judges on cpu and cuda devices only")
    if getattr(torch.version, "hip", None):
        raise UnsupportedDevice(
            f"this PyTorch is built for ROCm (HIP {torch.version.hip}): gpuarena's GPU backend times kernels with "
            "NVIDIA's CUPTI and audits them with NVIDIA's counters, and has no ROCm backend yet (docs/harness.md, "
            "'Device backends', lists what one needs: rocprofiler-sdk kernel tracing for the timer, its counters for "
            "the audit). Judge on cpu, or on an NVIDIA GPU"
        )
    if not torch.version.cuda:
        raise UnsupportedDevice(
            "this PyTorch answers to 'cuda' but was not built with CUDA (torch.version.cuda is empty: another "
            "vendor's build, such as MetaX MACA?): gpuarena's GPU backend needs NVIDIA's CUPTI; docs/harness.md, "
            "'Device backends', lists what another vendor's backend must provide"
        )
    return backend_named("cuda")
