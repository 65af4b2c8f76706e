"""Who holds the device's memory when a workload does not fit, read from outside the worker.

A workload that cannot fit the device gets no verdict (memory_plan.py: Status.ERROR): the
machine's size is not the solution's fault, and a service runs such a job again elsewhere. But
the solution's process shares the device with the supervisor: a solution that keeps memory (a
tensor made at import, a cache that only grows) takes it from the workload's buffers, and with
ERROR it would never get a verdict however often it ran. So before a workload is given up,
the worker gives back what it merely caches (`messages.Release`: the collector, torch's cached
blocks), the workload is drawn again, and where it still does not fit, what the worker's
processes hold is read from outside (Backend.held_by: the driver's per-process figures on a GPU,
the private resident memory on the host). Where the workload would have fit had the worker held
no more than its backend's `worker_allowance`, the solution took the memory: REJECTED."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from gpuarena.contracts import messages
from gpuarena.contracts.records import Status
from gpuarena.harness.launch.freeze import descendants
from gpuarena.harness.memory_plan import Drawn, gib

if TYPE_CHECKING:
    import torch

    from gpuarena.harness.device.backend_base import Backend
    from gpuarena.harness.launch.process import WorkerProcess

S = TypeVar("S")


def solution_took_it(held: int | None, allowance: int, drawn: Drawn) -> bool:
    """Whether the workload would have fit had the worker held no more than `allowance`: the
    plan's shortfall (or, where the supervisor ran out of memory before a plan, any holding)
    is within what the worker keeps beyond it."""
    if held is None or held <= allowance:
        return False
    plan = drawn.plan
    return plan is None or held - allowance >= plan.peak + plan.headroom - plan.free


def draw_workload(
    worker: WorkerProcess, backend: Backend, device: torch.device, deadline: float, draw: Callable[[], tuple[S, Drawn]]
) -> tuple[S, Drawn, Status]:
    """A workload drawn (`draw`: a fresh session and its draw, memory_plan.draw_and_allocate). One
    that does not fit is drawn again once the worker gave back what it caches, and where it
    still does not fit, the worker's holding says whose fault it is: REJECTED, the solution's;
    ERROR, the machine's (no verdict)."""
    session, drawn = draw()
    if not drawn.reason:
        return session, drawn, Status.PASSED
    worker.ask(messages.Release(), deadline, "giving back the memory it caches")
    session, drawn = draw()
    if not drawn.reason:
        return session, drawn, Status.PASSED
    held = backend.held_by(set(descendants(worker.proc.pid)))  # the sandbox's, the worker's, their children
    allowance = backend.worker_allowance
    if solution_took_it(held, allowance, drawn):
        assert held is not None  # solution_took_it says so
        drawn.reason = (
            f"the solution's process holds {gib(held)} of {device}'s memory, more than the "
            f"{gib(allowance)} a worker may keep for itself, and the workload did not fit beside it "
            f"({drawn.reason.removesuffix('; no verdict on the solution')}): a solution may not keep "
            "the memory its workloads need (read from outside the worker, after it gave back what it caches)"
        )
        return session, drawn, Status.REJECTED
    seen = "could not be read" if held is None else gib(held)
    drawn.reason += f" (the worker holds {seen} of it, after giving back what it caches)"
    return session, drawn, Status.ERROR
