"""Starting, talking to and always stopping the worker process."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gpuarena.harness import protocol
from gpuarena.harness.sandbox import become_subreaper, children_of, kill_new_children, process_cpu_ns

ENV_KEPT = (
    "PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH",
    "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CC", "CXX", "MAX_JOBS",
    "TRITON_INTERPRET", "TRITON_CACHE_DIR", "TRITON_HOME", "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "GPUARENA_CACHE",
    "TORCHINDUCTOR_CACHE_DIR",
)
"""Everything else (tokens, credentials, the supervisor's settings) stays out of the worker."""


class RunFailure(Exception):
    """Ends an evaluation with a verdict (TIMEOUT, RUNTIME_ERROR, ...)."""

    def __init__(self, status: str, reason: str, detail: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.detail = status, reason, detail


CACHE_VARIABLES = {
    "GPUARENA_CACHE": "gpuarena", "TRITON_CACHE_DIR": "triton", "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
}


def scrubbed_env(workdir: Path | None = None, user: tuple[int, int, bool] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in ENV_KEPT if k in os.environ}
    # inductor compiles in-process: a pool of compile workers would be a child process
    # left running, which the worker rejects
    env.update(PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1", TORCHINDUCTOR_COMPILE_THREADS="1")
    if user is not None and workdir is not None:
        # a worker of its own user has its home (and, for a per-run user, its compile caches)
        # in its working folder: the supervisor's home and caches are not its own
        env.update(HOME=str(workdir), USER="gpuarena-worker", LOGNAME="gpuarena-worker")
        if not user[2]:
            env.update({name: str(workdir / ".cache" / sub) for name, sub in CACHE_VARIABLES.items()})
    return env


def describe_exit(code: int | None) -> str:
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"


class WorkerProcess:
    """One worker: a fresh interpreter in its own session, its output going to a log file.

    The supervisor is a child subreaper, so whatever the solution spawns and orphans (a
    setsid or double-forked process escapes the worker's process group) is handed back to
    it and killed when the worker is closed.
    """

    def __init__(self, workdir: Path, log_path: Path, isolate_network: bool = False,
                 memory_limit: int | None = None, user: tuple[int, int, bool] | None = None):
        """user: (uid, gid, dedicated) to run the worker as (see sandbox.worker_identity);
        workdir must then be the worker's (the caller gives it the folder)."""
        self.log_path = log_path
        self.user = user
        self.last_wall_ns = 0
        """The supervisor's clock around the last request: send to reply."""
        self.last_cpu_ns: int | None = None
        """The worker's CPU time (all threads, from the kernel) over the last request."""
        self._closed = False
        become_subreaper()
        self._children_before = children_of(os.getpid())
        ours, theirs = socket.socketpair()
        self.conn = Connection(ours.detach())
        child_fd = theirs.detach()
        self._log = open(log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gpuarena.harness.sandbox", str(child_fd)]
                + (["--isolate-network"] if isolate_network else [])
                + (["--memory-limit", str(memory_limit)] if memory_limit else [])
                + (["--user", f"{user[0]}:{user[1]}"] if user else []),
                pass_fds=[child_fd], stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                env=scrubbed_env(workdir, user), cwd=workdir, start_new_session=True,
            )
        finally:
            os.close(child_fd)

    def request(self, message: dict[str, Any], deadline: float, doing: str, fds: list[int] | None = None) -> dict[str, Any]:
        """Send one request and wait for its reply until the run's deadline.

        Every request carries a fresh nonce that the reply must echo: a frame the solution
        writes on the socket itself (it shares the worker's file descriptors) cannot know
        it unless it reads the worker's memory, and a reply for another request is refused.
        fds: file descriptors to pass with the request (SCM_RIGHTS), right after it."""
        nonce = secrets.token_hex(8)
        cpu_before = process_cpu_ns(self.proc.pid)
        started = time.perf_counter_ns()
        try:
            protocol.send_request(self.conn, {**message, "nonce": nonce})
            if fds:
                protocol.send_fds(self.conn, fds)
            reply = protocol.receive_reply(self.conn, deadline - time.monotonic())
        except (protocol.WorkerGone, BrokenPipeError, ConnectionResetError):
            self._reap()
            raise RunFailure("RUNTIME_ERROR", f"the worker {describe_exit(self.proc.returncode)} while {doing}"
                             " (a crash, or the solution ended the process)") from None
        self.last_wall_ns = time.perf_counter_ns() - started
        cpu_after = process_cpu_ns(self.proc.pid)
        self.last_cpu_ns = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        if reply is None:
            self._dump_stacks()
            raise RunFailure("TIMEOUT", f"no answer within the time limit while {doing}")
        if reply.get("op") == "garbage":
            raise RunFailure("REJECTED", f"the worker's reply while {doing} was not a harness message")
        if reply.get("nonce") != nonce:
            raise RunFailure("REJECTED", f"a reply while {doing} did not answer the request (a forged or "
                                         "out-of-order message on the harness socket)")
        return reply

    def _dump_stacks(self, wait: float = 1.0) -> None:
        """Ask a worker that did not answer where it is: it writes its threads' Python stacks to
        its log (faulthandler on SIGUSR1, even inside a C call), which the record keeps. A
        solution can take the signal over; then the log just lacks the stacks."""
        try:
            os.kill(self.proc.pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(wait)

    def _reap(self, wait: float = 5.0) -> None:
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        """Stop the worker and everything it started (its whole process group); once."""
        if self._closed:
            return
        self._closed = True
        if self.proc.poll() is None:
            try:
                protocol.send_request(self.conn, {"op": "exit"})
                protocol.receive_reply(self.conn, 2.0)
            except Exception:
                pass
            self._reap(2.0)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self._reap()
        self.orphans_killed = kill_new_children(self._children_before)
        self.conn.close()
        self._log.close()

    def read_log(self, limit: int = 64_000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        text = data[-limit:].decode(errors="replace")
        return ("[... earlier output cut ...]\n" + text) if len(data) > limit else text
