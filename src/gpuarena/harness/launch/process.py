"""Starting, talking to and always stopping the worker process."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from gpuarena.contracts.status import Status
from gpuarena.harness import protocol
from gpuarena.harness.failure import RunFailure, worker_failure
from gpuarena.harness.inside import context_ahead, triton_key
from gpuarena.harness.inside.sandbox import become_subreaper
from gpuarena.harness.launch import cgroup, containment, schedstat
from gpuarena.harness.launch.freeze import FreezeFailure, Freezer, descendants
from gpuarena.harness.launch.gpu_view import gpu_view
from gpuarena.harness.launch.worker_env import CACHE_VARIABLES, SANDBOX_CACHE_ROOT, scrubbed_env
from gpuarena.harness.proctree import HARNESS_PROCESSES, children_of, describe_exit, kill_new_children, process_cpu_ns

if TYPE_CHECKING:
    from gpuarena.contracts import messages

R = TypeVar("R", bound="messages.Reply")
"""The reply a request names (messages.py, imported where a request is made: pydantic stays out
of the start of a worker started ahead)."""

IDLE_CPU_ALLOWANCE_NS = 20_000_000
IDLE_CPU_FRACTION = 0.02
"""A waiting worker may use this much CPU time over the whole run (plus this share of all its
waiting) for what idle threads do: the kernel's bookkeeping, a driver's polling thread waking
up. The budget is for the run, not for each wait: work split into many short waits, each under
an allowance of its own, adds up."""


_LIVE: set[int] = set()
"""The pids of this process's workers not yet closed (each the direct child started for one)."""


class WorkerProcess:
    """One worker: a fresh interpreter in a sandbox of its own (containment.py: PID, mount,
    network and IPC namespaces through bubblewrap, and a cgroup where the machine allows),
    its output going to a log file.

    Without bubblewrap the worker runs in its own session and the supervisor is a child
    subreaper, so whatever the solution spawns and orphans is handed back to it and killed
    when the worker is closed; the record says which containment was in force.
    """

    def __init__(
        self,
        workdir: Path,
        log_path: Path,
        isolate_network: bool = False,
        memory_limit: int | None = None,
        user: tuple[int, int, bool] | None = None,
        gpu: bool = True,
        exec_argv: list[str] | None = None,
        readable: Sequence[str] = (),
        writable: Sequence[str] = (),
        warm_triton: bool = False,
        context_on: int | None = None,
    ):
        """user: (uid, gid, dedicated) to run the worker as (see sandbox.worker_identity);
        workdir must then be the worker's (the caller gives it the folder). gpu: whether the
        worker may see the GPUs' device files (a CPU run's worker may not: its time would not
        count work done on a GPU). exec_argv: a program to run under the guards instead of the
        worker (profile mode's Nsight Compute; it does not answer requests), with the folders
        it must read (readable) and write (writable) besides the worker's. warm_triton: the
        worker computes Triton's cache key while it imports (harness/inside/triton_key.py);
        context_on: the CUDA ordinal whose context it makes meanwhile (inside/context_ahead.py)."""
        self.log_path = log_path
        self.user = user
        self.gpu = gpu
        self.last_wall_ns = 0
        """The supervisor's clock around the last request: from the thaw to the worker frozen again."""
        self.last_cpu_ns: int | None = None
        """The worker's CPU time (all threads, from the kernel) over the last request."""
        self.last_main_cpu_ns: int | None = None
        """The worker's main thread's time on a core over the last request (the kernel's schedstat)."""
        self.last_excused_ns = 0
        """How long in the last request the worker's main thread waited for a core beyond what
        the rest of the worker ran meanwhile, and the supervisor's own thread waited for one:
        another process's load, not the worker's work (a thread of the solution's holding the
        main thread's core is not excused; what the worker runs to delay the supervisor is its
        CPU time, which the other bounds bill)."""
        self.idle_since: tuple[int, int] | None = None
        """(wall ns, CPU ns) at the last reply once the solution is loaded: the worker waits
        from then on, and a waiting worker works for nobody (check_idle)."""
        self.idle_cpu_ns = 0
        self.idle_wall_ns = 0
        """The worker's CPU time while it waited between requests, and how long it waited, summed
        over the run (check_idle)."""
        self._closed = self._stopped = False
        self.init_pid: int | None = None
        """The sandbox's init (bubblewrap, pid 1 of the worker's PID namespace), in our namespace."""
        self.worker_pid: int | None = None
        self.cgroup: cgroup.Cgroup | None = None
        self.memory_watch: containment.MemoryWatch | None = None
        """The memory limit watched from outside, where no cgroup counts memory."""
        self.threads: set[int] | None = None
        """The worker's thread ids as the harness left them (counted from outside), once known."""
        self._freezer: Freezer | None = None
        self.gpus_shown = ""
        """Which GPUs' device files the sandbox shows (gpu_view.py), for the record."""
        become_subreaper()
        self._children_before = children_of(os.getpid())
        ours, theirs = socket.socketpair()
        self.conn = Connection(ours.detach())
        child_fd = theirs.detach()
        self._log = open(log_path, "wb")
        binary = containment.bwrap_path()
        self.sandbox_problem = containment.sandbox_problem()
        # a program run instead of the worker (ncu) may need loopback, which bubblewrap's network
        # namespace has and the worker's own unshare (without bubblewrap) leaves down
        own_netns = isolate_network and not (exec_argv and not self.sandbox_problem)
        command = (
            [sys.executable, "-m", "gpuarena.harness.inside.sandbox", str(child_fd)]
            + (["--isolate-network"] if own_netns else [])
            + (["--memory-limit", str(memory_limit)] if memory_limit else [])
            + (["--user", f"{user[0]}:{user[1]}"] if user else [])
            + ([triton_key.FLAG] if warm_triton and not exec_argv else [])
            + ([context_ahead.FLAG, str(context_on)] if context_on is not None and not exec_argv else [])
            + (["--exec", *exec_argv] if exec_argv else [])
        )
        self.readable, self.writable = list(readable), list(writable)
        self.cache_root = SANDBOX_CACHE_ROOT if not self.sandbox_problem else workdir / ".cache"
        """Where the worker compiles, as the worker sees it (when it runs as a user of its own per run)."""
        env = scrubbed_env(workdir, user, self.cache_root)
        try:
            if self.sandbox_problem:
                self.proc = subprocess.Popen(
                    command,
                    pass_fds=[child_fd],
                    stdin=subprocess.DEVNULL,
                    stdout=self._log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=workdir,
                    start_new_session=True,
                )
                self.worker_pid = self.proc.pid
            else:
                self._start_sandboxed(binary, command, child_fd, workdir, env, isolate_network, memory_limit)
        finally:
            os.close(child_fd)
        _LIVE.add(self.proc.pid)

    def _start_sandboxed(
        self,
        binary: str | None,
        command: list[str],
        child_fd: int,
        workdir: Path,
        env: dict[str, str],
        network: bool,
        memory_limit: int | None,
    ) -> None:
        assert binary is not None
        run_folder = self.log_path.parent
        self.cgroup = cgroup.Cgroup.make(f"gpuarena-{os.getpid()}-{secrets.token_hex(4)}", memory_limit)
        tmpfs = min(containment.DEFAULT_TMPFS_BYTES, memory_limit or containment.DEFAULT_TMPFS_BYTES)
        # beside the run's folder, not in it: the run's folder is bound into the sandbox, and a
        # worker of the supervisor's own user (no root) could read bubblewrap's report there
        info_path = run_folder.with_name(run_folder.name + ".sandbox.json")
        info_fd = os.open(info_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        shared = containment.shared_folders(env, bool(self.user and self.user[2]), list(CACHE_VARIABLES))
        view = gpu_view(env) if self.gpu else None
        if view is not None and view.visible is not None:
            env["CUDA_VISIBLE_DEVICES"] = view.visible  # by UUID: the sandbox numbers only its own GPUs
        self.gpus_shown = view.described if view is not None else ""
        argv = containment.sandbox_argv(
            binary,
            run_folder,
            workdir,
            gpu=self.gpu,
            network=network,
            tmpfs_bytes=tmpfs,
            env=env,
            shared=shared + self.writable,
            readable=self.readable,
            gpu_files=view.files if view is not None else (),
            gpu_hidden=view.hidden if view is not None else (),
        )
        # the options go through a pipe (--args), not the command line: /proc/1/cmdline inside
        # the sandbox would otherwise show the worker every path bound or hidden from it
        options_read, options_write = os.pipe()
        os.write(options_write, b"\0".join(a.encode() for a in argv[1:] + ["--info-fd", str(info_fd)]) + b"\0")
        os.close(options_write)
        try:
            self.proc = subprocess.Popen(
                [argv[0], "--args", str(options_read), "--", *command],
                pass_fds=[child_fd, info_fd, options_read],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=run_folder,
                start_new_session=True,
                preexec_fn=self.cgroup.enter if self.cgroup.folders else None,
            )
        finally:
            os.close(info_fd)
            os.close(options_read)
        self.sandbox_options = argv[1:]
        try:
            self.init_pid = containment.read_info(info_path, self.proc)
        finally:
            info_path.unlink(missing_ok=True)
        if memory_limit and not self.cgroup.counts_memory:
            self.memory_watch = containment.MemoryWatch(self.init_pid, memory_limit)
        deadline = time.monotonic() + 30
        while self.worker_pid is None and time.monotonic() < deadline and self.proc.poll() is None:
            children = children_of(self.init_pid)
            if children:
                self.worker_pid = min(children)
            else:
                time.sleep(0.002)
        if self.worker_pid is None:
            raise OSError("the sandboxed worker did not start")

    @property
    def freezer(self) -> Freezer:
        """Freezes the worker between requests (freeze.py): its cgroup's freezer, else SIGSTOP."""
        if self._freezer is None:
            pid = self.worker_pid or self.proc.pid
            self._freezer = Freezer(self.cgroup, lambda: descendants(pid))
        return self._freezer

    @property
    def containment(self) -> str:
        """Which containment the worker runs in, for the record."""
        if self.sandbox_problem:
            return (
                f"none: no sandbox ({self.sandbox_problem}); in-process guards only; frozen between "
                f"requests ({self.freezer.method})"
            )
        limits = ", ".join(self.cgroup.limits) if self.cgroup and self.cgroup.limits else "no cgroup limits"
        if self.memory_watch is not None:
            limits += f", memory watched from outside ({self.memory_watch.limit_bytes >> 20} MiB resident)"
        network = ", network" if "--unshare-net" in self.sandbox_options else ""
        return (
            f"bubblewrap: PID, mount, IPC, UTS{network} namespaces, read-only system view, private /tmp and "
            f"/dev/shm, {self.gpus_shown if self.gpu else 'no GPU device files'}; {limits}; "
            f"frozen between requests ({self.freezer.method})"
        )

    def cpu_ns(self) -> int | None:
        """CPU time of the worker and everything it started: the cgroup's account where there
        is one, else the worker process's (its threads, and the children it reaped)."""
        if self.cgroup is not None:
            total = self.cgroup.cpu_ns()
            if total is not None:
                return total
        return process_cpu_ns(self.worker_pid) if self.worker_pid else None

    def check_contained(self, doing: str, after_import: bool = False) -> None:
        """From outside the worker: no process but the worker in its PID namespace, and no
        thread the harness did not start. What the solution starts must end before its
        request does; the kernel's view of the namespace cannot be patched from inside."""
        if self.init_pid is None:
            return
        processes = containment.namespace_processes(self.init_pid)
        if processes is None:
            return  # the sandbox is gone: the next request says how
        extra = [pid for pid, state in processes.items() if pid > 2 and state not in ("Z", "X")]
        what = "importing the solution" if after_import else "solve()"
        if extra:
            raise RunFailure(
                Status.REJECTED,
                f"{what} left {len(extra)} process(es) running in the worker's sandbox "
                f"after {doing} (seen from outside the worker)",
            )
        if self.threads is None:
            return
        now = containment.namespace_threads(self.init_pid, 2)
        if now is None:
            return
        new = now - self.threads
        if new:  # the worker is frozen: no grace, whatever the thread would do next
            raise RunFailure(
                Status.REJECTED,
                f"{what} left {len(new)} thread(s) in the worker after {doing} "
                "(counted from outside the worker, frozen at its reply)",
            )
        self.threads = now

    def mark_threads(self) -> None:
        """The worker's threads now are the harness's own: any later one is the solution's."""
        if self.init_pid is not None:
            self.threads = containment.namespace_threads(self.init_pid, 2)

    def ask(self, message: messages.Request[R], deadline: float, doing: str, fds: list[int] | None = None) -> R:
        """`request`, with a failure reply raised as the run's verdict (checked: worker_failure)."""
        from gpuarena.contracts import messages

        reply = self.request(message, deadline, doing, fds)
        if isinstance(reply, messages.Failure):
            raise worker_failure(reply)
        return reply

    def request(
        self, message: messages.Request[R], deadline: float, doing: str, fds: list[int] | None = None
    ) -> R | messages.Failure:
        """Send one request and wait for its reply until the run's deadline: the request's reply
        model, or the worker's Failure; anything else is REJECTED (messages.read_reply).

        Every request carries a fresh nonce that the reply must echo: a frame the solution
        writes on the socket itself (it shares the worker's file descriptors) cannot know
        it unless it reads the worker's memory, and a reply for another request is refused.
        fds: file descriptors to pass with the request (SCM_RIGHTS), right after it."""
        from gpuarena.contracts import messages

        nonce = secrets.token_hex(8)
        main_before, own_before = schedstat.main_thread(self.worker_pid or self.proc.pid), schedstat.this_thread()
        cpu_before = self.cpu_ns()
        self.check_idle(time.perf_counter_ns(), cpu_before, doing)
        self.freezer.thaw()
        started = time.perf_counter_ns()
        try:
            protocol.send_request(self.conn, message.model_copy(update={"nonce": nonce}))
            if fds:
                protocol.send_fds(self.conn, fds)
            reply = protocol.receive_reply(self.conn, deadline - time.monotonic())
        except (protocol.WorkerGone, BrokenPipeError, ConnectionResetError):
            self._reap()
            if self.memory_watch is not None and self.memory_watch.exceeded_bytes:
                raise RunFailure(
                    Status.RUNTIME_ERROR,
                    f"the worker went over its memory limit while {doing}: "
                    f"{self.memory_watch.exceeded_bytes >> 20} MiB resident, limit "
                    f"{self.memory_watch.limit_bytes >> 20} MiB (seen from outside)",
                ) from None
            raise RunFailure(
                Status.RUNTIME_ERROR,
                f"the worker {describe_exit(self.exit_code)} while {doing}"
                " (a crash, or the solution ended the process)",
            ) from None
        if reply is not None:  # frozen before anything of the reply is read or checked
            self._freeze(doing)
        self.last_wall_ns = time.perf_counter_ns() - started
        cpu_after = self.cpu_ns()
        main_after, own_after = schedstat.main_thread(self.worker_pid or self.proc.pid), schedstat.this_thread()
        self.last_cpu_ns = cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
        self.last_excused_ns, self.last_main_cpu_ns = 0, None
        if main_before is not None and main_after is not None:
            ran, waited = main_after[0] - main_before[0], main_after[1] - main_before[1]
            self.last_main_cpu_ns = ran
            if self.last_cpu_ns is not None:
                self.last_excused_ns = max(0, waited - max(0, self.last_cpu_ns - ran))
        if own_before is not None and own_after is not None:  # the supervisor's own waits for a core
            self.last_excused_ns += max(0, own_after[1] - own_before[1])
        if reply is None:
            self._dump_stacks()
            raise RunFailure(Status.TIMEOUT, f"no answer within the time limit while {doing}")
        if reply.get("op") == "garbage":
            raise RunFailure(
                Status.REJECTED,
                f"the worker's reply while {doing} was not a harness message ({reply.get('why', 'unreadable')})",
            )
        if reply.get("nonce") != nonce:
            raise RunFailure(
                Status.REJECTED,
                f"a reply while {doing} did not answer the request (a forged or "
                "out-of-order message on the harness socket)",
            )
        try:
            typed = messages.read_reply(reply, message)
        except messages.NotAReply as exc:
            raise RunFailure(
                Status.REJECTED, f"the worker's reply while {doing} was not a harness message ({exc})"
            ) from None
        if isinstance(message, (messages.Prepare, messages.StartRuntime)) or (
            isinstance(message, messages.Time) and message.kernel_library is not None
        ):
            self.mark_threads()  # the harness's own: the CUDA driver's, the profilers', a language runtime's
        else:
            self.check_contained(doing, after_import=isinstance(message, messages.Build))
        if isinstance(message, messages.Build) or self.idle_since is not None:
            self.idle_since = (time.perf_counter_ns(), self.cpu_ns() or 0)
        return typed

    def _freeze(self, doing: str) -> None:
        try:
            self.freezer.freeze()
        except FreezeFailure as exc:
            raise RunFailure(Status.REJECTED, f"the worker could not be frozen after {doing}: {exc}") from None

    def check_idle(self, now_ns: int, cpu_ns: int | None, doing: str) -> None:
        """From outside the worker: between a reply and the next request the worker only waits,
        so its CPU time must not grow. Work there (a language runtime's threads, which the
        thread count admits, finishing or precomputing after a call returned) is billed to no
        request, and would run while the reference is timed: REJECTED."""
        if self.idle_since is None or cpu_ns is None:
            return
        wall_ns, cpu_then = self.idle_since
        self.idle_cpu_ns += cpu_ns - cpu_then
        self.idle_wall_ns += now_ns - wall_ns
        allowed = IDLE_CPU_ALLOWANCE_NS + IDLE_CPU_FRACTION * self.idle_wall_ns
        if self.idle_cpu_ns > allowed:
            raise RunFailure(
                Status.REJECTED,
                f"the worker used {self.idle_cpu_ns / 1e6:.1f} ms of CPU time while it waited "
                f"for the harness ({self.idle_wall_ns / 1e6:.0f} ms of waiting so far, up to "
                f"{doing}; allowed {allowed / 1e6:.1f} ms; seen from outside the worker): work "
                "after a call returned is billed to no call",
            )

    @property
    def exit_code(self) -> int | None:
        """The worker's exit status as Popen gives it (negative: killed by that signal); bubblewrap
        passes a killed child on as 128 + the signal."""
        code = self.proc.returncode
        if code is not None and self.init_pid is not None and code > 128:
            return -(code - 128)
        return code

    def _dump_stacks(self, wait: float = 1.0) -> None:
        """Ask a worker that did not answer where it is: it writes its threads' Python stacks to
        its log (faulthandler on SIGUSR1, even inside a C call), which the record keeps. A
        solution can take the signal over; then the log just lacks the stacks."""
        try:
            os.kill(self.worker_pid or self.proc.pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(wait)

    def _reap(self, wait: float = 5.0) -> None:
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            pass

    def stop(self, ask: bool = True) -> None:
        """End the worker at once: asked to leave (it flushes its output first) unless `ask` is
        false (another thread is waiting on its socket), then its process group killed. What
        it wrote is complete after this; its process may still be leaving the GPU (close)."""
        if self._stopped:
            return
        self._stopped = True
        if self.memory_watch is not None:
            self.memory_watch.stop()
        if self._freezer is not None:
            self._freezer.thaw()  # a frozen worker takes no request, and in cgroup v1 no signal
        if ask and self.proc.poll() is None:
            from gpuarena.contracts import messages

            try:
                protocol.send_request(self.conn, messages.Exit())
                protocol.receive_reply(self.conn, 2.0)
            except Exception:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def close(self, ask: bool = True) -> None:
        """Stop the worker and everything it started (its whole process group) and wait for
        it to be gone; once."""
        if self._closed:
            return
        self._closed = True
        self.stop(ask)
        self._reap()
        if self.cgroup is not None:
            self.cgroup.remove()
        _LIVE.discard(self.proc.pid)
        # our children that came after this worker are its orphans (we are its subreaper: the
        # sandbox's init and what its namespace held are handed to us as they die), but for
        # other workers started since (the next run's, started ahead: harness/evaluator.py) and
        # the harness's own processes; in a sandbox, only processes of a deeper PID namespace
        self.orphans_killed = kill_new_children(
            self._children_before | _LIVE | HARNESS_PROCESSES, sandboxed_only=self.init_pid is not None
        )
        self.conn.close()
        self._log.close()

    def read_log(self, limit: int = 64_000) -> str:
        """The log's last `limit` bytes: never more, whatever the worker made of the file (a
        sparse file of a terabyte, say)."""
        try:
            with open(self.log_path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - limit))
                data = f.read(limit)
        except OSError:
            return ""
        text = data.decode(errors="replace")
        return ("[... earlier output cut ...]\n" + text) if size > limit else text
