"""The trusted reference (or no solution at all) run through the worker's own `time` code, in
the supervisor: the measure of the harness's share of a solution's request, on the CPU (its
CPU time) and on CUDA (what the GPU's counters see of it, for the device audit)."""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import torch

from gpuarena.contracts import messages
from gpuarena.harness.proctree import children_of
from gpuarena.harness.session import WorkloadSession
from gpuarena.harness.transport import memfd_tensor
from gpuarena.harness.trusted_worker import TrustedWorker

if TYPE_CHECKING:
    from gpuarena.harness.run_context import RunContext


class ReferenceTwin:
    """The reference timed through the worker's own `time` code, in the supervisor (CPU).

    Run this way, the reference's block does all the harness work a solution's block does
    in the worker (poisoning, copying outputs out, checks, the loop), in the same
    conditions (the same shared input sets, caches as the other side left them), so the
    supervisor's CPU time over the block less the calls' windows is a faithful measure of
    the harness's own cost: the allowance against which the worker's CPU time is judged.
    The reference is trusted; its outputs go to buffers of the supervisor's own, never to
    the shared destinations the solution's outputs are checked in."""

    def __init__(self, supervisor: RunContext, session: WorkloadSession, solve: Any = None, convention: str = "return"):
        self.worker = TrustedWorker(None)  # type: ignore[arg-type]  # no connection: used in-process
        w = self.worker
        w.timer = supervisor.timer
        w.device = session.device
        w.backend = supervisor.backend  # what it seeds before each call, where the problem draws in its calls
        w.convention = convention  # the reference: "return", whatever the solution's convention
        w.input_names = session.input_names
        w.output_names = supervisor.problem.spec.outputs
        w.sets = session.sets
        self.session = session
        w.dests = [[shared_like(d) for d in dests] for dests in session.dests]
        w.children = children_of(os.getpid())
        w.solve = solve or supervisor.problem.reference

    pace_ns = 0
    """How long each call of a no-op twin waits on the host before it returns (see no_op)."""

    @classmethod
    def no_op(cls, supervisor: RunContext, session: WorkloadSession, convention: str | None = None) -> ReferenceTwin:
        """The harness alone: a solve() that does nothing (destination convention) or returns
        ready outputs of the right shapes, through the worker's own `time` code. What the GPU
        shows for it is the harness's share of a solution's request (poisoning, copying
        outputs out), for the device audit to take off. `convention`: the solution's unless
        given (the reference always returns its outputs).

        Each call waits `pace_ns` on the host first: the audit sets it to the solution's own
        host time per call, so that the harness's GPU work is spaced out as in the solution's
        request. The counters are read per sample (about 120 µs on an H100), and the busiest
        SM's time of work that shares a sample is less than the sum of each piece's: a copy
        right after a cache sweep is partly hidden in it, one a millisecond later is not. An
        unpaced twin took off less than the harness's share of a solution that spends
        milliseconds on the host in every call, and an honest softmax calling gc.collect()
        was REJECTED (8.98 µs observed for 4.42 claimed, H100)."""
        convention = convention or supervisor.convention
        outs = [torch.empty_like(d) for d in session.dests[0]]
        twin: ReferenceTwin

        def solve(*_: Any, **__: Any) -> Any:
            if twin.pace_ns:
                until = time.perf_counter_ns() + twin.pace_ns
                while time.perf_counter_ns() < until:
                    pass
            if convention == "destination":
                return None
            return outs[0] if len(outs) == 1 else tuple(outs)

        twin = cls(supervisor, session, solve=solve, convention=convention)
        return twin

    def block(self, n: int, evict: bool = True) -> tuple[list[int], list[int], int]:
        """n timed calls: device samples, end-to-end samples, the harness's CPU time: the
        block's CPU time less the calls' own CPU time (Timer.calls_cpu_ns), not less their
        windows, which also hold the waits for a core of a busy machine."""
        timer = self.worker.timer
        assert timer is not None
        started = time.thread_time_ns()
        if self.worker.backend.host_timed:  # the CPU: its bounds take the harness's CPU time (bounds.py)
            timer.calls_cpu_ns = 0
        try:
            with torch.no_grad():  # entered once, outside the calls' windows
                # seeded as the worker's calls are (a problem that draws in its calls): the seeding's
                # cost is the harness's, and the reference draws as it did for the checked outputs
                reply = self.worker.time(messages.Time(n=n, evict=evict, seeds=self.session.seeds))
            in_calls = timer.calls_cpu_ns
        finally:
            timer.calls_cpu_ns = None
        spent = time.thread_time_ns() - started
        assert reply.device_ns is not None and reply.e2e_ns is not None  # the trusted worker's own samples
        if not in_calls:  # not counted (a GPU's block): the windows, as the calls' time
            in_calls = sum(reply.e2e_ns)
        return reply.device_ns, reply.e2e_ns, max(spent - in_calls, 0)


def shared_like(tensor: torch.Tensor) -> torch.Tensor:
    """A buffer of the supervisor's own of the same kind as a shared destination: on the host,
    shared memory (transport.memfd_tensor, as the arena's), which the worker's copies write to at
    another cost than to private memory (4 KiB pages: 130 µs a call against the worker's 460
    for a 2 MiB softmax output on the 2-core VM, which its wall-clock bound then took for the
    solution's). Device memory elsewhere."""
    if not tensor.is_cpu or tensor.numel() == 0 or not hasattr(os, "memfd_create"):
        return torch.empty_like(tensor)
    shared, fd = memfd_tensor(tuple(tensor.shape), tensor.dtype)
    os.close(fd)
    return shared
