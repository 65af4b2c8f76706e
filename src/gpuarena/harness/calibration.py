"""What the worker's process adds to the harness's CPU time and to the supervisor's clock around
a request on this machine, measured before any solution code is in it: the allowances'
per-request parts for the bounds on the CPU (bounds.TimeBudget).

The bound allows a solution's request the harness's own CPU work, measured on the reference's
block run through the worker's `time` code in the supervisor (twin.ReferenceTwin). That twin
runs in the supervisor's thread; the worker's request also pays what its process costs: the
protocol at both ends of its socket, waking up, its sandbox, the checks over all its threads,
whatever the kernel bills to it. How much that is depends on the machine: a fixed guess (the
protocol's round trip, timed in one process) left an honest 20 µs call 7 µs a call unexplained
on a slower CI machine while it passed with 22 µs to spare on the 2-core VM. So it is measured:
harness-only blocks (a solve() that does nothing, on tiny buffers) in the worker, its CPU time
read from outside, against the same blocks through the twin in the supervisor, alternating.
It runs after the harness's own set-up and the language runtime and before the solution is
built, so nothing of the solution can shape it.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from gpuarena.contracts import messages
from gpuarena.contracts.records import Status
from gpuarena.harness.device.timing import Timer
from gpuarena.harness.failure import RunFailure
from gpuarena.harness.inside.stand_in import no_op_solve, stand_in_buffers
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.trusted_worker import TrustedWorker

if TYPE_CHECKING:  # types only
    from gpuarena.harness.device.backend_base import Backend

ROUNDS = 7
"""Pairs of blocks per size: the median of seven is one busy moment away from nothing."""
SIZES = (1, 8)
"""Calls per block: the extra's per-request part from the first, its per-call part from both."""


@dataclass(frozen=True)
class ProcessExtra:
    """The worker's CPU time beyond the twin's for the same harness-only block, and the
    supervisor's clock around the worker's request beyond the twin's: per request and per
    call, each at least 0."""

    per_request_ns: float
    per_call_ns: float
    wall_per_request_ns: float = 0.0
    wall_per_call_ns: float = 0.0

    def for_request(self, calls: int) -> float:
        return self.per_request_ns + self.per_call_ns * calls

    def wall_for_request(self, calls: int) -> float:
        return self.wall_per_request_ns + self.wall_per_call_ns * calls


def _split(extra: dict[int, float]) -> tuple[float, float]:
    """(per request, per call) from the extras of the blocks of SIZES calls."""
    small, large = SIZES
    per_call = max(0.0, (extra[large] - extra[small]) / (large - small))
    return max(0.0, extra[small] - per_call * small), per_call


def calibrate(
    worker: WorkerProcess, device: torch.device, backend: Backend, setup: messages.RunSetup, deadline: float
) -> ProcessExtra | None:
    """The worker's extra over the twin, from ROUNDS alternating pairs of blocks of each size in
    SIZES (medians); None where the worker's CPU time cannot be read from outside (the bound
    then rejects: bounds.TimeBudget.check). Must run before the worker builds the solution
    (it refuses after)."""
    twin = TrustedWorker(None)  # type: ignore[arg-type]  # no connection: used in-process
    twin.timer = Timer(device, backend=backend)
    twin.device = device
    twin.input_names, twin.output_names = list(setup.input_names), list(setup.output_names)
    twin.sets, twin.dests = stand_in_buffers(twin.input_names, twin.output_names, device)
    twin.solve = no_op_solve("return", twin.dests[0])  # the run's twin is the reference: it returns
    extra: dict[int, float] = {}
    wall: dict[int, float] = {}
    for n in SIZES:
        theirs: list[int] = []
        ours: list[int] = []
        their_wall: list[int] = []
        our_wall: list[int] = []
        for _ in range(ROUNDS):
            reply = worker.request(messages.Calibrate(n=n, setup=setup), deadline, "calibrating the harness")
            if isinstance(reply, messages.Failure):
                raise RunFailure(Status.RUNTIME_ERROR, f"the harness could not be calibrated: {reply.reason}")
            if worker.last_cpu_ns is None:
                return None
            theirs.append(worker.last_cpu_ns)
            their_wall.append(worker.last_wall_ns - worker.last_excused_ns)
            started = time.thread_time_ns()
            twin.time(messages.Time(n=n))
            ours.append(time.thread_time_ns() - started)
            our_wall.append(ours[-1])  # the twin's harness only works: its CPU time is its time
        extra[n] = statistics.median(theirs) - statistics.median(ours)
        wall[n] = statistics.median(their_wall) - statistics.median(our_wall)
    per_request, per_call = _split(extra)
    wall_per_request, wall_per_call = _split(wall)
    return ProcessExtra(per_request, per_call, wall_per_request, wall_per_call)
