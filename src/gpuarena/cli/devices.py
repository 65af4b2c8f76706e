"""The --device argument: its default and its check, shared by the commands that run the harness."""

from __future__ import annotations

from gpuarena.errors import GpuarenaError


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_device(device: str) -> None:
    """A clear error for a device this machine does not have."""
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise GpuarenaError(f"--device {device!r} is not a device; use cpu, cuda or cuda:N") from None
    if parsed.type not in ("cpu", "cuda"):
        raise GpuarenaError(f"--device {device!r}: only cpu and cuda devices are supported")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise GpuarenaError("--device cuda: no CUDA GPU is visible here (torch.cuda.is_available() is False)")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise GpuarenaError(f"--device {device}: only {torch.cuda.device_count()} GPU(s) here")
