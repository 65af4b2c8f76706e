"""The runner's device slots: as it announces them (with its stack), as --devices lists them, and
whether each is still healthy. Which devices the host has: gpuarena/host_devices.py."""

from __future__ import annotations

import re
import subprocess

from gpuarena.contracts.device import DeviceKind, is_gpu, pinning
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.errors import GpuarenaError
from gpuarena.host_devices import cpu_vendor, device_kind, nvidia_smi_gpus

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
        parsed = DeviceKind.parse(slot.kind)
        kind = str(parsed.on_stack(stack)) if stack else slot.kind
        if len(kind) > 64:
            raise GpuarenaError(f"device kind {kind!r} is longer than 64 characters: use a shorter --stack")
        vendor = slot.vendor or (
            "NVIDIA" if is_gpu(slot) and slot.name.startswith("NVIDIA") else cpu_vendor() if not is_gpu(slot) else ""
        )
        advertised.append(
            slot.model_copy(
                update={
                    "kind": kind,
                    "stack": stack or parsed.stack,
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
            gpus = dict(nvidia_smi_gpus())
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
