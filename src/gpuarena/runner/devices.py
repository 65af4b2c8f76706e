"""Which devices this host has, and the kind each is routed by ("cpu", "H100", "RTX-4090")."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

from gpuarena.errors import GpuarenaError
from gpuarena.service.schemas import DeviceSlot

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


def _nvidia_smi() -> list[tuple[int, str]]:
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
        for index, name in _nvidia_smi() or _torch_gpus():
            slots.append(DeviceSlot(device=f"cuda:{index}", kind=device_kind(name), name=name, vendor="NVIDIA"))
    return slots


_STACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,39}")


def advertise(slots: list[DeviceSlot], stack: str = "") -> list[DeviceSlot]:
    """The slots as the runner announces them: each with this host's software (gpuarena.stack)
    and, where a stack is named, that stack in its kind ("H100@vllm"), so that jobs asking for
    that stack come here and nowhere else."""
    from gpuarena.stack import versions

    if stack and not _STACK_NAME.fullmatch(stack):
        raise GpuarenaError(f"--stack {stack!r}: use 1 to 40 letters, digits and . _ + - (e.g. maca, torch-2.13-cpu)")
    software = versions()
    advertised = []
    for slot in slots:
        base = slot.kind.partition("@")[0]
        kind = f"{base}@{stack}" if stack else slot.kind
        if len(kind) > 64:
            raise GpuarenaError(f"device kind {kind!r} is longer than 64 characters: use a shorter --stack")
        vendor = slot.vendor or (
            "NVIDIA" if is_gpu(slot) and slot.name.startswith("NVIDIA") else cpu_vendor() if not is_gpu(slot) else ""
        )
        advertised.append(
            slot.model_copy(
                update={
                    "kind": kind,
                    "stack": stack or slot.kind.partition("@")[2],
                    "software": software,
                    "vendor": vendor,
                }
            )
        )
    return advertised


def parse_devices(spec: str, where: str = "--devices") -> list[DeviceSlot]:
    """Device slots from a list such as "cuda:0,cuda:1", "cpu" or "cpu:0,cpu:1=fake-gpu".

    Items are separated by commas or new lines; each is DEVICE or DEVICE=KIND. DEVICE is
    cpu, cpu:N (one more worker on the CPU: how multi-device hosts are tested without a GPU)
    or cuda:N (the host's GPU N; its kind comes from nvidia-smi unless KIND is given)."""
    items = [item.strip() for line in spec.splitlines() for item in line.split(",")]
    items = [item for item in items if item and not item.startswith("#")]
    gpus: dict[int, str] | None = None
    slots: list[DeviceSlot] = []
    for item in items:
        device, _, kind = (part.strip() for part in item.partition("="))
        if not re.fullmatch(r"cpu(:\d+)?|cuda:\d+", device):
            raise GpuarenaError(
                f"{where}: {device!r} is not a device; use cpu, cpu:N or cuda:N (optionally =KIND, e.g. cuda:0=H100)"
            )
        if device.startswith("cpu"):
            slots.append(DeviceSlot(device=device, kind=kind or "cpu", name="CPU"))
            continue
        if gpus is None:
            gpus = dict(_nvidia_smi())
        name = gpus.get(int(device.partition(":")[2]), "")
        if not kind and not name:
            raise GpuarenaError(
                f"{where}: {device} is not on this host (nvidia-smi lists "
                f"{', '.join(f'cuda:{i}' for i in gpus) or 'no GPU'}); give its kind as {device}=KIND"
            )
        slots.append(DeviceSlot(device=device, kind=kind or device_kind(name), name=name or kind))
    if len({s.device for s in slots}) != len(slots):
        raise GpuarenaError(f"{where}: a device is listed twice: {spec!r}")
    return slots


def is_gpu(slot: DeviceSlot) -> bool:
    return slot.device.startswith("cuda")


def pinning(slot: DeviceSlot) -> tuple[str, dict[str, str]]:
    """The harness device and the environment that pin a job (or a health check) to slot:
    CUDA_VISIBLE_DEVICES=N for cuda:N, so the child process sees exactly that GPU as cuda, with
    CUDA numbering the GPUs in PCI bus order as nvidia-smi does (the slots' numbers are
    nvidia-smi's; CUDA's own order, fastest first, can differ on a host of mixed models)."""
    if is_gpu(slot):
        return "cuda", {"CUDA_VISIBLE_DEVICES": slot.device.partition(":")[2], "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    return "cpu", {}


HEALTH_TIMEOUT_S = 120.0


def health_check(slot: DeviceSlot, present: set[str] | None = None, timeout_s: float = HEALTH_TIMEOUT_S) -> str:
    """Why slot is unusable, or "" when it is healthy.

    A device missing from present (the host's devices listed again) has disappeared. A GPU
    must also run a tiny CUDA op in a child process pinned to it (`gpuarena.runner.health`),
    within timeout_s: a GPU that errors, hangs or is gone fails. The CPU needs no op."""
    if present is not None and slot.device not in present:
        return f"{slot.device} disappeared (no longer listed among this host's devices)"
    if not is_gpu(slot):
        return ""
    import os
    import sys

    _, pin = pinning(slot)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gpuarena.runner.health"],
            env={**os.environ, **pin},
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return f"{slot.device}: the health check (a tiny CUDA op) did not finish within {timeout_s:.0f} s"
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).strip().splitlines() if line.strip()]
        return f"{slot.device}: the health check (a tiny CUDA op) failed: {lines[-1] if lines else done.returncode}"
    return ""
