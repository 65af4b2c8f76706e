"""What a one-shot run starts on its GPU before its own process has imported torch (no torch
here, on purpose).

Measured on an H100 (bench/research/cli_timeline.py), `gpuarena run` spent 1.5-2.0 s
importing torch and only then 0.65 s starting the device audit's PM sampler (a process of
ours) and asking nvidia-smi for the device's clocks. Neither needs torch, so both start in
threads as the run begins and are ready when the supervisor asks for them. The sampler is
the supervisor's own process either way: it starts before any of the solution's code runs,
as it always did (harness/supervisor.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from gpuarena.harness.launch.started import _switch

if TYPE_CHECKING:  # the threads import what they use: this module is imported on the run's path
    from gpuarena.harness.device.device_audit import DeviceSampler


class DeviceAhead:
    """The PM sampler and nvidia-smi's reading of GPU `index`, started now; `take_sampler()`
    and `state()` wait for them. sampler=False: only the reading (test mode, no audit)."""

    def __init__(self, index: int, sampler: bool = True):
        self.index = index
        self._state: dict[str, Any] | None = None
        self._sampler: DeviceSampler | None = None
        self._reading = threading.Thread(target=self._read, name="gpuarena-gpu-state", daemon=True)
        self._starting: threading.Thread | None = None
        self._reading.start()
        if sampler and _switch("GPUARENA_DEVICE_AUDIT", True):
            self._starting = threading.Thread(target=self._start_sampler, name="gpuarena-sampler-ahead", daemon=True)
            self._starting.start()

    def _read(self) -> None:
        from gpuarena.harness.device import environment

        self._state = environment.gpu_state(self.index)

    def _start_sampler(self) -> None:
        """Any failure leaves no sampler: the run starts its own and records why it could not."""
        from gpuarena.harness.device import device_audit

        binary, _ = device_audit.build_sampler()
        if binary is None:
            return
        try:
            self._sampler = device_audit.DeviceSampler(binary, self.index)
        except (device_audit.SamplerError, OSError):
            self._sampler = None

    def state(self, index: int) -> dict[str, Any] | None:
        """nvidia-smi's reading, if it was of GPU `index` (None: the caller reads it)."""
        self._reading.join()
        return self._state if index == self.index else None

    def take_sampler(self, index: int) -> DeviceSampler | None:
        """The sampler started ahead, handed over once, if it watches GPU `index` and still runs."""
        if self._starting is None:
            return None
        self._starting.join()
        sampler, self._sampler = self._sampler, None
        if sampler is not None and (index != self.index or sampler.process.poll() is not None):
            sampler.close()
            return None
        return sampler

    def close(self) -> None:
        """A sampler no run took is quit."""
        self._reading.join()
        if self._starting is not None:
            self._starting.join()
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
