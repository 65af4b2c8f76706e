"""What the run's phases read of the run: the timing rounds (measure.py), the reference's twin
(twin.py), the device audit (rounds_audit.py) and the ncu phase (kernel_duration.py). The
supervisor is one (it imports those modules and hands itself over); they depend on this
contract, never on the supervisor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import random

    import torch

    from gpuarena.contracts.records import Environment
    from gpuarena.harness.calibration import ProcessExtra
    from gpuarena.harness.device.backend_base import Backend
    from gpuarena.harness.device.device_audit import DeviceSampler
    from gpuarena.harness.device.timing import Timer
    from gpuarena.harness.phases import Phases
    from gpuarena.problems.loader import Problem


class RunContext(Protocol):
    """One run as its phases see it."""

    problem: Problem
    convention: str
    """How the solution hands back its outputs: its own convention, else the problem's."""
    backend: Backend
    device: torch.device
    deadline: float
    """The run's time limit, on time.monotonic()."""
    rng: random.Random
    """Draws what the worker must not predict (which calls are checked)."""
    timer: Timer | None
    """Times the reference, with the method the supervisor chose for both sides."""
    process_extra: ProcessExtra | None
    peaks: dict[str, float] | None
    environment: Environment | None
    phases: Phases
    sampler_missing: str
    sampler_lost: bool

    @property
    def sampler(self) -> DeviceSampler | None:
        """The GPU's counters for the device audit, started on first use."""

    def release_sampler(self) -> None:
        """Quit the sampler (the ncu phase's profiler needs the counters)."""
