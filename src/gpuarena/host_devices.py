"""Which devices this host has, the hardware beside stack.py's software: the CPU and each GPU
nvidia-smi (else torch) lists, as device slots with the kind each is routed by ("cpu", "H100",
"RTX-4090"). The runner advertises them (runner/devices.py); a suite run spread over GPUs pins
one process to each (suite/shard.py)."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

from gpuarena.contracts.wire import DeviceSlot

_VENDOR_WORDS = {"NVIDIA", "AMD", "GeForce", "Tesla", "Radeon", "Instinct"}
_STOP = re.compile(r"^(\d+GB|SXM\d*|PCIe|HBM\d*e?|NVL|MIG.*|Graphics|Laptop|GPU)$", re.IGNORECASE)


def device_kind(name: str) -> str:
    """A short, stable name for a GPU model: "NVIDIA H100 80GB HBM3" -> "H100",
    "NVIDIA GeForce RTX 4090" -> "RTX-4090", "NVIDIA A100-SXM4-80GB" -> "A100"."""
    tokens = [t for t in re.split(r"[\s\-]+", name.strip()) if t and t not in _VENDOR_WORDS]
    kept: list[str] = []
    for token in tokens:
        if _STOP.match(token):
            break
        kept.append(token)
    return "-".join(kept) or name.strip() or "gpu"


def nvidia_smi_gpus() -> list[tuple[int, str]]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    gpus = []
    for line in out.strip().splitlines():
        index, _, name = line.partition(",")
        if index.strip().isdigit():
            gpus.append((int(index), name.strip()))
    return gpus


def _torch_gpus() -> list[tuple[int, str]]:
    import torch

    if not torch.cuda.is_available():
        return []
    return [(i, torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())]


def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it (GenuineIntel, AuthenticAMD...), else the machine type."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("vendor_id", "CPU implementer"):
                return value.strip()
    except OSError:
        pass
    return platform.machine() or "cpu"


def detect(cpu: bool = True, gpus: bool = True) -> list[DeviceSlot]:
    """One slot per device: the CPU (when cpu) and each visible NVIDIA GPU."""
    slots = [DeviceSlot(device="cpu", kind="cpu", name="CPU", vendor=cpu_vendor())] if cpu else []
    if gpus:
        for index, name in nvidia_smi_gpus() or _torch_gpus():
            slots.append(DeviceSlot(device=f"cuda:{index}", kind=device_kind(name), name=name, vendor="NVIDIA"))
    return slots
