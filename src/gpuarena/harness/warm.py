"""What a long-lived evaluation process keeps between jobs on one GPU (the warm path, issue 18).

Measured on an H100 (bench/research/warm_breakdown.py), a small job through the warm path
spent 0.6 s starting the PM sampler, 0.9 s waiting for its worker's CUDA context and
profiler, and 0.3 s waiting for the worker's process to leave the GPU; none of it judges
anything. Here the sampler is kept from one job to the next, waiting workers make their CUDA
context before their job, and a finished worker is torn down while the next job starts.

None of that may touch a job's timed rounds: another process making or destroying a CUDA
context while a solution is timed would disturb its figures and the device audit. `gpu` is
the lock for that (GpuLock): a job holds it alone while it times; a waiting worker while it
prepares and a finished one while it is torn down hold it together, since neither times
anything (one waiting for the other put a retiring worker's 0.14 s before the next job's
start, H200). Nothing of a solution is kept: the sampler is a process of the supervisor's, and
a worker still serves one solution only.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # types only
    from gpuarena.harness.device.device_audit import DeviceSampler

QUIET_WAIT_S = 60.0
"""The longest a job waits for the GPU to be its own (a waiting worker's CUDA start takes
about 1 s on an H100); past it the job times anyway, and the device audit judges what it sees."""


class GpuLock:
    """Held alone by a job while it times (`alone`), and together by workers being prepared or
    torn down (`acquire`/`release`, as a threading.Lock is used). A job waiting to time goes
    first: no worker takes the lock while one waits, so a stream of workers cannot hold off a
    job's timing."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._sharers = 0
        self._timing = False
        self._timers_waiting = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Shared: with other workers' preparing and tearing down, never with a job's timing."""
        with self._changed:
            free = self._changed.wait_for(
                lambda: not self._timing and not self._timers_waiting, _wait(blocking, timeout)
            )
            self._sharers += free
            return free

    def release(self) -> None:
        with self._changed:
            self._sharers -= 1
            self._changed.notify_all()

    def locked(self) -> bool:
        with self._changed:
            return self._timing or self._sharers > 0

    @contextmanager
    def alone(self, timeout: float) -> Iterator[bool]:
        """The GPU to a job's timing alone (True), or after `timeout` without it (False)."""
        with self._changed:
            self._timers_waiting += 1
            try:
                taken = self._changed.wait_for(lambda: not self._timing and not self._sharers, timeout)
                self._timing = taken
            finally:
                self._timers_waiting -= 1
                self._changed.notify_all()
        try:
            yield taken
        finally:
            if taken:
                with self._changed:
                    self._timing = False
                    self._changed.notify_all()


def _wait(blocking: bool, timeout: float) -> float | None:
    """threading.Lock.acquire's arguments as Condition.wait_for's timeout."""
    return 0.0 if not blocking else None if timeout < 0 else timeout


class Warm:
    """Kept between one device's jobs: the PM sampler, the GPU's lock, workers being torn down."""

    def __init__(self) -> None:
        self.sampler: DeviceSampler | None = None
        """The device audit's sampler, handed from one job to the next (None: the next job starts one)."""
        self.gpu = GpuLock()
        self._retiring: list[threading.Thread] = []

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The GPU is the job's alone: no other process of ours starts or stops on it meanwhile."""
        with self.gpu.alone(QUIET_WAIT_S):
            yield

    def retire(self, teardown: Callable[[], None]) -> None:
        """Run a finished worker's teardown in the background, holding the GPU's lock."""

        def run() -> None:
            taken = self.gpu.acquire(timeout=QUIET_WAIT_S)  # beside other workers' comings and goings
            try:
                teardown()
            finally:
                if taken:
                    self.gpu.release()

        thread = threading.Thread(target=run, name="gpuarena-retire", daemon=True)
        self._retiring = [t for t in self._retiring if t.is_alive()] + [thread]
        thread.start()

    def take_sampler(self) -> DeviceSampler | None:
        """The kept sampler if its process still runs, else None (and the dead one is closed)."""
        sampler, self.sampler = self.sampler, None
        if sampler is not None and sampler.process.poll() is not None:
            sampler.close()
            return None
        return sampler

    def close(self) -> None:
        """Wait for every teardown, then stop the sampler."""
        for thread in self._retiring:
            thread.join()
        self._retiring = []
        if self.sampler is not None:
            self.sampler.close()
            self.sampler = None
