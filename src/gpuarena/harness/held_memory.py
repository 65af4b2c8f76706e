"""Who holds the device's memory when a workload does not fit, read from outside the worker.

A workload that cannot fit the device gets no verdict (memory_plan.py: Status.ERROR): the
machine's size is not the solution's fault, and a service runs such a job again elsewhere. But
the solution's process shares the device with the supervisor: a solution that keeps memory (a
tensor made at import, a cache that only grows) takes it from the workload's buffers, and with
ERROR it would never get a verdict however often it ran. So before a workload is given up,
the worker gives back what it merely caches (`messages.Release`: the collector, torch's cached
blocks), the workload is drawn again, and where it still does not fit, what the worker's
processes hold is read from outside: the driver's per-process figures on a GPU (nvidia-smi),
the private resident memory on the host (/proc). Where the workload would have fit had the
worker held no more than WORKER_ALLOWANCE, the solution took the memory: REJECTED."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from gpuarena.contracts import messages
from gpuarena.contracts.records import Status
from gpuarena.harness.memory_plan import Drawn, gib
from gpuarena.harness.proctree import children_of

if TYPE_CHECKING:
    import torch

    from gpuarena.harness.launch.process import WorkerProcess

S = TypeVar("S")
WORKER_ALLOWANCE = {"cuda": 2 << 30, "cpu": 1 << 30}
"""What a worker may hold of its device for itself (its runtime: a CUDA context with torch's
and the libraries' workspaces is about 0.5-1 GiB on an H200, torch's private memory on the
host a few hundred MiB), whatever its solution keeps beyond it counted against the solution."""
SMI_TIMEOUT_S = 20.0


def process_tree(pid: int) -> set[int]:
    """pid and every process below it (the sandbox's, the worker's, anything they started)."""
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p not in found:
            found.add(p)
            todo += children_of(p)
    return found


def held_bytes(device: torch.device, pids: set[int]) -> int | None:
    """What the processes `pids` hold of `device` now, or None where it cannot be read."""
    return gpu_held(pids) if device.type == "cuda" else host_held(pids)


def gpu_held(pids: set[int]) -> int | None:
    """The device memory the driver charges to `pids` (on every GPU of the machine: a worker
    sees one). None without nvidia-smi, or where its process ids are not this process's own
    (another PID namespace: then not even the supervisor is listed)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=SMI_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    held, listed = 0, set()
    for line in done.stdout.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            listed.add(int(fields[0]))
            if int(fields[0]) in pids:
                held += int(fields[1]) << 20
    return held if os.getpid() in listed or listed & pids else None


def host_held(pids: set[int]) -> int | None:
    """The private resident memory of `pids` (RssAnon: the shared input sets they map are the
    supervisor's, not theirs). None where none of them can be read."""
    held, read = 0, False
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        held += int(line.split()[1]) << 10
                        read = True
        except (OSError, ValueError, IndexError):
            continue
    return held if read else None


def solution_took_it(held: int | None, allowance: int, drawn: Drawn) -> bool:
    """Whether the workload would have fit had the worker held no more than `allowance`: the
    plan's shortfall (or, where the supervisor ran out of memory before a plan, any holding)
    is within what the worker keeps beyond it."""
    if held is None or held <= allowance:
        return False
    plan = drawn.plan
    return plan is None or held - allowance >= plan.peak + plan.headroom - plan.free


def draw_workload(
    worker: WorkerProcess, device: torch.device, deadline: float, draw: Callable[[], tuple[S, Drawn]]
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
    held = held_bytes(device, process_tree(worker.proc.pid))
    allowance = WORKER_ALLOWANCE.get(device.type, WORKER_ALLOWANCE["cpu"])
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
