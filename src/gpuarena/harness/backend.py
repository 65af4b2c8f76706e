"""Which device backend judges a run, and a clear refusal where none can.

The harness has two today: the CPU, and NVIDIA GPUs through CUDA. Everything vendor-specific
that the NVIDIA backend uses lives in the modules named in `NVIDIA_PIECES`; docs/harness.md
("Device backends") says what a ROCm (HIP) or MetaX (MACA) backend must provide for each. A
PyTorch built for another vendor still answers to `torch.device("cuda")`, so without this check a
ROCm machine would start a run and fail deep inside CUPTI; it is refused at the door instead,
naming the gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Backend:
    """What judges a run on one kind of device."""

    name: str
    """cpu or nvidia."""
    timer: str
    """How a call's time is taken (Timing.method in the record)."""
    device_audit: bool
    """Whether the device's own counters bound the claimed time from outside (device_audit.py)."""
    kernel_duration: bool
    """Whether a second figure per kernel comes from the hardware's own duration counter."""
    memory_sharing: str
    """How the supervisor's buffers reach the worker (transport.py)."""


CPU = Backend(name="cpu", timer="cpu-perf-counter", device_audit=False, kernel_duration=False,
              memory_sharing="shared memory files")
NVIDIA = Backend(name="nvidia", timer="cupti-device-time", device_audit=True, kernel_duration=True,
                 memory_sharing="CUDA IPC and the driver's VMM file descriptors")

NVIDIA_PIECES: dict[str, str] = {
    "timing.py": "each call's device time from CUPTI activity records of the calls' kernels",
    "range_timer.py, kernel_duration.py": "each kernel's gpu__time_duration from CUPTI's range profiler and ncu",
    "device_audit.py, rounds_audit.py": "the GPU's PM counters sampled from outside the worker (CUPTI PM sampling)",
    "cupti_build.py": "building those CUPTI programs against the CUDA toolkit",
    "icache_sweep.py": "an instruction-cache sweep kernel compiled with nvcc for the device's architecture",
    "cuda_vmm.py, transport.py": "device buffers shared with the worker (cuMem* with POSIX file descriptors, CUDA IPC)",
    "peaks.py, environment.py": "the device's peaks and identity (nvidia-smi, clocks)",
    "profile.py, ncu_report.py": "profile mode under Nsight Compute",
}
"""The harness's NVIDIA-specific modules and what each does: what another vendor's backend replaces."""


class UnsupportedDevice(GpuarenaError):
    """A device the harness has no backend for."""


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
            "the audit). Judge on cpu, or on an NVIDIA GPU")
    if not torch.version.cuda:
        raise UnsupportedDevice(
            "this PyTorch answers to 'cuda' but was not built with CUDA (torch.version.cuda is empty: another "
            "vendor's build, such as MetaX MACA?): gpuarena's GPU backend needs NVIDIA's CUPTI; docs/harness.md, "
            "'Device backends', lists what another vendor's backend must provide")
    return NVIDIA
