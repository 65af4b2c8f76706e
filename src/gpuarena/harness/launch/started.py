"""A run's worker started ahead of the run (no torch here, on purpose).

Starting a worker costs its interpreter and its imports (torch: seconds). A runner's job
process starts one while it waits for its job, and `gpuarena run` starts one before its own
process imports torch, so the two imports overlap; the supervisor takes it when its guards
match the run's, and starts a fresh one otherwise."""

from __future__ import annotations

import importlib.util
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from gpuarena.harness.device.backend import compiles_triton, worker_setup
from gpuarena.harness.device.backend import context_ordinal as backend_context_ordinal
from gpuarena.harness.inside.sandbox import default_memory_limit, protect_supervisor, worker_identity
from gpuarena.harness.launch.process import WorkerProcess

if TYPE_CHECKING:
    from gpuarena.contracts import messages

PREPARE_LIMIT_S = 120.0
"""How long a worker started ahead may take to import and make its CUDA context."""


def _switch(name: str, default: bool) -> bool:
    """An on/off setting from the environment (1/0, on/off, true/false, yes/no)."""
    setting = os.environ.get(name, "").strip().lower()
    if setting in ("1", "on", "true", "yes"):
        return True
    if setting in ("0", "off", "false", "no"):
        return False
    return default


def warm_triton(prepare_on: str | None) -> bool:
    """Whether a worker started ahead computes Triton's cache key while it imports
    (harness/inside/triton_key.py): on a GPU, where Triton is installed."""
    return prepare_on is not None and compiles_triton(prepare_on) and importlib.util.find_spec("triton") is not None


def context_ordinal(prepare_on: str | None) -> int | None:
    """The ordinal whose context a worker started ahead makes while it imports
    (harness/inside/context_ahead.py): the device it prepares on, where that is a GPU."""
    if prepare_on is None or not _switch("GPUARENA_CONTEXT_AHEAD", True):
        return None
    return backend_context_ordinal(prepare_on)


class SharedLock(Protocol):
    """The GPU's lock as a waiting worker takes it: threading.Lock's, or warm.GpuLock's shared side."""

    def acquire(self, blocking: bool = ..., timeout: float = ...) -> bool: ...

    def release(self) -> None: ...


class StartedWorker:
    """A run's worker and folder, set up before the run: every guard applied, the worker's
    interpreter and torch loaded, nothing of the problem or the solution in it yet. A runner's
    job process makes one while it waits for its job, so the job does not wait for it.

    isolation: run the worker as a user of its own (default: GPUARENA_WORKER_ISOLATION, on);
    memory_limit_bytes: its memory cap (default: RunOptions' default); prepare_on: a CUDA
    device to make the worker's context and profiler on as soon as its imports are done,
    holding `gpu_lock` meanwhile (harness/warm.py), so that its job does not wait for them."""

    def __init__(
        self,
        isolation: bool | None = None,
        memory_limit_bytes: int | None = None,
        gpu: bool = True,
        prepare_on: str | None = None,
        gpu_lock: SharedLock | None = None,
    ):
        self.isolate = _switch("GPUARENA_WORKER_ISOLATION", True) if isolation is None else isolation
        self.memory_limit_bytes = memory_limit_bytes
        self.gpu = gpu
        """Whether the worker sees the GPUs (a CPU run's must not: its time would not count GPU work)."""
        self.user: tuple[int, int, bool] | None = None
        self.prepared_on: str | None = None
        """The device the worker made its context and timer on ahead of its job (None: not yet)."""
        self.prepared: messages.Prepared | None = None
        """The worker's `prepare` reply ahead of its job (what its timer does, said before any
        solution code ran)."""
        self._preparing: threading.Thread | None = None
        if self.isolate:
            protect_supervisor(True)
        self._folder = tempfile.TemporaryDirectory(prefix="gpuarena-run-")
        try:
            # a context made while another job times could disturb it: only where no lock is shared
            context_on = context_ordinal(prepare_on) if gpu_lock is None else None
            self.process = self._start(Path(self._folder.name), memory_limit_bytes, warm_triton(prepare_on), context_on)
        except BaseException:
            self._folder.cleanup()
            if self.isolate:
                protect_supervisor(False)
            raise
        if prepare_on is not None:
            self._preparing = threading.Thread(
                target=self._prepare, args=(prepare_on, gpu_lock), name="gpuarena-prepare", daemon=True
            )
            self._preparing.start()

    def _prepare(self, device: str, gpu_lock: SharedLock | None) -> None:
        """The worker's `prepare` (its CUDA context and timer) once its imports are done; any
        failure leaves it unprepared, and its run prepares it and says what went wrong."""
        from gpuarena.contracts import messages  # pydantic: after the worker was started

        deadline = time.monotonic() + PREPARE_LIMIT_S
        try:
            # what the backend does once for every worker, done here while the worker imports
            request = messages.Prepare(setup=messages.RunSetup(device=device, **worker_setup(device)))
            self.process.ask(messages.Ready(), deadline, "starting")
            if gpu_lock is not None and not gpu_lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
                return
            try:
                reply = self.process.request(request, deadline, "preparing the device")
            finally:
                if gpu_lock is not None:
                    gpu_lock.release()
        except Exception:  # the run sends `prepare` itself and reports what it gets
            return
        if isinstance(reply, messages.Prepared):
            self.prepared, self.prepared_on = reply, device

    def wait_prepared(self) -> None:
        """Wait for the preparation started ahead, if any (the run then talks to the worker alone)."""
        if self._preparing is not None:
            self._preparing.join()
            self._preparing = None

    def _start(
        self, tmp: Path, memory_limit_bytes: int | None, triton_key: bool, context_on: int | None
    ) -> WorkerProcess:
        # every guard is on by default, on the CPU and on CUDA (run on an H100: see
        # docs/harness.md); each has a switch for platforms where it cannot be applied
        memory = (
            (memory_limit_bytes or default_memory_limit()) if _switch("GPUARENA_WORKER_MEMORY_LIMIT", True) else None
        )
        # the run's folder is the supervisor's (the log lives there, out of the worker's
        # reach); the worker works in a folder of its own inside it
        self.user = worker_identity() if self.isolate else None
        workdir = tmp / "work"
        workdir.mkdir(mode=0o700)
        if self.user is not None:
            os.chmod(tmp, 0o711)
            os.chown(workdir, self.user[0], self.user[1])
        return WorkerProcess(
            workdir,
            tmp / "worker.log",
            isolate_network=_switch("GPUARENA_WORKER_NETNS", True),
            memory_limit=memory,
            user=self.user,
            gpu=self.gpu,
            warm_triton=triton_key,
            context_on=context_on,
        )

    @property
    def workdir(self) -> Path:
        """The worker's own folder (its home and, for a user of its own per run, its caches)."""
        return Path(self._folder.name) / "work"

    @property
    def caches_per_run(self) -> bool:
        """Whether the worker compiles into its own folder (a new user per run), so that its
        caches are gone with it unless the supervisor keeps them (build_cache.py)."""
        return self.user is not None and not self.user[2]

    def alive(self) -> bool:
        return self.process.proc.poll() is None

    def close(self) -> None:
        """Stop the worker and everything it started, remove the folder."""
        try:
            # a thread still preparing the worker waits on its socket: do not ask it to leave
            preparing = self._preparing is not None and self._preparing.is_alive()
            self.process.close(ask=not preparing)
            self.wait_prepared()
        finally:
            self._folder.cleanup()
            if self.isolate:
                protect_supervisor(False)
