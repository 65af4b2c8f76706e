"""What machine a run happened on: device identity, clocks, versions."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from typing import Any

from gpuarena.contracts.records import Environment


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_state(index: int) -> dict[str, Any] | None:
    """Clocks, temperature and driver from nvidia-smi (None where it is missing)."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = "driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,uuid"
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", str(index)],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    values = [v.strip() for v in out.split(",")]
    if len(values) != 6:
        return None
    return dict(zip(["driver_version", "sm_clock_mhz", "mem_clock_mhz", "temperature_c", "power_w", "uuid"], values))


def _triton_version() -> str | None:
    """Triton's version from its installed metadata: importing it only to ask (0.4 s) was on
    every run's path."""
    loaded = sys.modules.get("triton")
    if loaded is not None:
        return getattr(loaded, "__version__", None)
    for name in ("triton", "pytorch-triton"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _common() -> dict[str, Any]:
    """What every run's description holds, whatever its device."""
    import torch

    return dict(
        torch_version=torch.__version__,
        triton_version=_triton_version(),
        python_version=sys.version.split()[0],
        cpu_model=_cpu_model(),
        hostname=socket.gethostname(),
        triton_interpret=os.environ.get("TRITON_INTERPRET", "") not in ("", "0"),
    )


def capture_cpu() -> Environment:
    """The description of a run on the host's cores."""
    return Environment(device="cpu", device_name=_cpu_model(), **_common())


def capture_nvidia(index: int, state: dict[str, Any] | None = None) -> Environment:
    """The description of a run on CUDA device `index` (state: nvidia-smi's reading of it,
    taken already; None: read now)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    state = state or gpu_state(index)
    return Environment(
        device=f"cuda:{index}",
        device_name=props.name,
        device_uuid=str(getattr(props, "uuid", "")) or (state or {}).get("uuid"),
        sm_count=props.multi_processor_count,
        compute_capability=f"{props.major}.{props.minor}",
        memory_gb=round(props.total_memory / 2**30, 2),
        l2_cache_mb=round(getattr(props, "L2_cache_size", 0) / 2**20, 2) or None,
        driver_version=(state or {}).get("driver_version"),
        cuda_runtime=torch.version.cuda,
        clocks_before=state,
        **_common(),
    )
