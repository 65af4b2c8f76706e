"""A worker started before the CLI's own imports (typer, rich and the subcommands: about 0.15 s),
so that its imports (torch: seconds) overlap more of this process's: the console script
(cli/entry.py) starts it for `gpuarena run`, which takes it when it was started for the device
it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

_started: tuple[str | None, Any] | None = None
"""(the --device it was started for, the StartedWorker), until `run` takes it."""


def worker_ahead(device: str | None):
    """A worker started now, before torch is imported here, for the supervisor to take; None
    where it cannot start (the run then starts its own and reports why it could not)."""
    from gpuarena.harness.launch.started import StartedWorker

    gpu = device != "cpu" if device else Path("/dev/nvidiactl").exists()
    # its CUDA context too, while this process imports torch: a fresh process's current
    # device is cuda:0, which the run names a bare `cuda` as
    target = device or "cuda"
    prepare_on = (target if ":" in target else f"{target}:0") if gpu and target.startswith("cuda") else None
    try:
        return StartedWorker(gpu=gpu, prepare_on=prepare_on)
    except Exception:  # the run's own start says what is wrong
        return None


def start(device: str | None) -> None:
    """Start the worker for this --device now, for `run` to take."""
    global _started
    _started = (device, worker_ahead(device))


def take(device: str | None):
    """The worker started early for this device, or one started now; an early one for another
    device (an argument this module read otherwise than the CLI) is closed."""
    global _started
    early, _started = _started, None
    if early is not None:
        wanted, worker = early
        if wanted == device and worker is not None:
            return worker
        if worker is not None:
            worker.close()
    return worker_ahead(device)
