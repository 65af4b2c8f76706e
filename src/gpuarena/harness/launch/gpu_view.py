"""Which GPU device files a job's sandbox shows: the job's own GPUs, never the host's others.

Binding every /dev/nvidia* into each GPU job's sandbox left `CUDA_VISIBLE_DEVICES` as the only
thing pinning the job: a child process without it reached every GPU of the host, where other
users' runs are being timed. Where the NVIDIA driver says which device file is which GPU
(/proc/driver/nvidia/gpus/<bus id>/information: its minor number and UUID), the sandbox shows
only the device files of the GPUs `CUDA_VISIBLE_DEVICES` names, and the driver's shared ones
(nvidiactl, nvidia-uvm, nvidia-modeset, nvidia-caps); and the worker names its GPUs by UUID,
since CUDA numbers only the GPUs it can open, and index 3 of the host is the sandbox's only one.

An index is read in PCI bus order, as nvidia-smi numbers the GPUs (and runners pin them); CUDA
numbers them fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, which is the same order on a
host of one GPU model. Where the two could differ (models mixed, no PCI_BUS_ID), where a MIG
instance is named, or where the driver's table cannot be read, every GPU's files are shown as
before, and the record says so.

The host's other GPUs are hidden from the job's /sys and /proc as well (`GpuView.hidden`): their
PCI device folders (/sys/bus/pci/devices/<bus id>, where the CUDA driver and nvidia-smi read a
GPU's identity and topology) and their driver-table folders are empty folders in the sandbox.
The rest of /sys stays (read-only): the driver reads the PCI tree above the job's own GPU.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

DRIVER_TABLE = Path("/proc/driver/nvidia/gpus")
"""One folder per GPU, by PCI bus id, each with an `information` file."""
DEVICES = Path("/dev")
SYS = Path("/sys")
GPU_DEVICE_PREFIXES = ("nvidia", "dri", "kfd")
"""Device files of GPUs (NVIDIA, and AMD's for ROCm)."""
_ONE_GPU = re.compile(r"nvidia(\d+)$")


@dataclass(frozen=True)
class NvidiaGpu:
    bus: str
    minor: int
    uuid: str
    model: str


@dataclass(frozen=True)
class GpuView:
    """The device files a GPU job's sandbox binds, and the worker's CUDA_VISIBLE_DEVICES."""

    files: list[str]
    visible: str | None
    """The worker's CUDA_VISIBLE_DEVICES (by UUID) where the view is the job's GPUs; None: unchanged."""
    described: str
    """For the record: which GPUs' files are shown, and why all where all are."""
    hidden: tuple[str, ...] = ()
    """Folders of the host's other GPUs, shown empty in the sandbox: their PCI device folders in
    /sys and their folders in the driver's table."""


def nvidia_gpus(table: Path | None = None) -> list[NvidiaGpu]:
    """The host's NVIDIA GPUs in PCI bus order, from the driver's table (empty where unreadable)."""
    table = table or DRIVER_TABLE
    found = []
    try:
        folders = sorted(table.iterdir())
    except OSError:
        return []
    for folder in folders:
        try:
            fields = dict(
                line.split(":", 1) for line in (folder / "information").read_text().splitlines() if ":" in line
            )
            found.append(
                NvidiaGpu(
                    bus=folder.name,
                    minor=int(fields["Device Minor"].strip()),
                    uuid=fields["GPU UUID"].strip(),
                    model=fields.get("Model", "").strip(),
                )
            )
        except (OSError, KeyError, ValueError):
            return []  # a table we cannot read whole: no view built on part of it
    return found


def named(visible: str, gpus: list[NvidiaGpu], pci_order: bool) -> list[NvidiaGpu] | None:
    """The GPUs CUDA_VISIBLE_DEVICES names, in its order; None where they cannot be told for sure."""
    chosen = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            if not (pci_order or len({g.model for g in gpus}) == 1) or int(entry) >= len(gpus):
                return None
            chosen.append(gpus[int(entry)])
        elif entry.startswith("GPU-"):
            matches = [g for g in gpus if g.uuid.startswith(entry)]
            if len(matches) != 1:
                return None
            chosen.append(matches[0])
        else:
            return None  # a MIG instance, or something CUDA itself would refuse
    return chosen or None


def others_folders(others: list[NvidiaGpu], table: Path, sys_root: Path) -> tuple[str, ...]:
    """Where /sys and the driver's table describe GPUs the job does not have (real paths: the
    sandbox mounts over the folder, not over a link to it)."""
    found: list[str] = []
    for gpu in others:
        found.append(str(table / gpu.bus))
        device = sys_root / "bus" / "pci" / "devices" / gpu.bus
        if device.exists():
            found.append(os.path.realpath(device))
    return tuple(found)


def gpu_view(
    env: dict[str, str], table: Path | None = None, devices: Path | None = None, sys_root: Path | None = None
) -> GpuView:
    """The device files of the GPUs the job's environment names (see the module)."""
    devices = devices or DEVICES
    try:
        names = sorted(n for n in os.listdir(devices) if n.startswith(GPU_DEVICE_PREFIXES))
    except OSError:
        names = []
    every = [str(devices / n) for n in names]
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return GpuView(every, None, "every GPU's device files (CUDA_VISIBLE_DEVICES unset: the job may use them all)")
    gpus = nvidia_gpus(table)
    chosen = named(visible, gpus, env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID") if gpus else None
    if chosen is None:
        return GpuView(every, None, f"every GPU's device files (CUDA_VISIBLE_DEVICES={visible} not matched to them)")
    minors = {g.minor for g in chosen}
    shared = [n for n in names if n.startswith("nvidia") and not _ONE_GPU.match(n)]
    own = [f"nvidia{m}" for m in sorted(minors) if f"nvidia{m}" in names]
    others = [g for g in gpus if g not in chosen]
    return GpuView(
        [str(devices / n) for n in [*shared, *own]],
        ",".join(g.uuid for g in chosen),
        f"the device files of {len(chosen)} GPU(s) of {len(gpus)} ({', '.join(g.bus for g in chosen)})"
        + (f"; the other {len(others)} hidden in /sys and /proc" if others else ""),
        others_folders(others, table or DRIVER_TABLE, sys_root or SYS),
    )
