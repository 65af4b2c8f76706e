"""Each run (and each setup command) runs in the harness's bubblewrap sandbox, as kernels do
(harness/launch/process.py `WorkerProcess` with `exec_argv`; containment.py says what the sandbox
shows): the sandbox's entry point (harness/inside/sandbox.py) applies its guards and then becomes the
app. So an app runs

- as an unprivileged worker user of its own (`sandbox.worker_identity()`, when gpuarena runs
  as root; the same uid for the setup commands and every run of one app, which owns the
  working copy), without capabilities, with no_new_privs;
- in PID, mount, IPC, UTS and network namespaces of its own: no network (loopback only), and
  the time limit kills the sandbox, so whatever the app started dies with it (the namespace
  dies with its init, double-forked daemons included); a run that exits also takes everything
  it started with it;
- with the worker's memory cap (`default_memory_limit()`, or none with
  GPUARENA_WORKER_MEMORY_LIMIT=0), and on `--device cpu` without the GPUs' device files;
- seeing the system, the Python installation and its packages, the tools on PATH and CUDA
  read-only, and writing only its working copy (`run_root/work`), its output folder
  (`run_root/_gpuarena_output`), the files its stdout and stderr go to, and a private /tmp and
  home (tmpfs, gone with the run). The app's source folder and the golden folder are not
  shown at all (or read-only, where they lie inside a folder the sandbox shows).

Its environment is the worker's (launch/worker_env.scrubbed_env: PATH, the Python, CUDA and compiler
variables, a home and TMPDIR of its own; nothing else of the supervisor's) plus
GPUARENA_APP_SEED, GPUARENA_APP_OUTPUT, GPUARENA_APP_DEVICE and PYTHONHASHSEED; the worker's
one-thread caps (OMP_NUM_THREADS and the like) are not imposed on apps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuarena.harness.inside.sandbox import default_memory_limit, needs_read_search, protect_supervisor, worker_identity
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.launch.started import _switch

TAIL_BYTES = 16_384
"""How much of stdout and stderr a report keeps (the end)."""
STDOUT_SCAN_BYTES = 4 * 1024 * 1024
"""How much of stdout the performance regex reads (the end)."""
THREAD_CAPS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TORCHINDUCTOR_COMPILE_THREADS")
"""The worker's one-thread settings (launch/worker_env.scrubbed_env), which an app does not get: its
numerical libraries keep the thread pools they have outside gpuarena."""

_LAUNCH = """\
import json, os, sys
spec = json.loads(sys.argv[1])
for fd, path in ((1, spec["stdout"]), (2, spec["stderr"])):
    target = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.dup2(target, fd)
    os.close(target)
os.chdir(spec["cwd"])
for name in spec["unset"]:
    os.environ.pop(name, None)
os.environ.update(spec["env"])
try:
    os.execvp(spec["argv"][0], spec["argv"])
except OSError as exc:
    with open(spec["failed"], "w") as f:
        f.write(f"cannot start: {exc}")
    os._exit(127)
"""
"""Run inside the sandbox once its guards apply (sandbox.py --exec): stdout and stderr to the
files the supervisor made, the working copy as the current folder, the app's variables set,
then the app's own command in its place."""


class RunResult(BaseModel):
    """One run of the app (or of a setup command)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    command: list[str]
    """What was run."""
    exit_code: int | None
    """The exit status; None when it was killed for the time limit."""
    timed_out: bool = False
    """Whether the time limit killed it."""
    wall_s: float
    """Wall-clock seconds."""
    stdout_tail: str = ""
    """The end of stdout."""
    stderr_tail: str = ""
    """The end of stderr."""
    figure: float | None = None
    """The performance figure this run reported, if any was read."""
    figure_error: str | None = None
    """Why the figure could not be read."""


def _tail_fd(fd: int, limit: int) -> str:
    """The end of an open file, read through the supervisor's own descriptor: whatever the app
    did to the file's name (a symbolic link in its place, say), this is the file it wrote."""
    size = os.fstat(fd).st_size
    return os.pread(fd, min(limit, size), max(0, size - limit)).decode("utf-8", errors="replace")


class Sandbox:
    """What every sandboxed run of one app shares: its user, its limits, and the folders beside
    its working copy. run_root holds work/ and the output folder (both bound writable), io/
    (the files stdout and stderr go to, writable) and sandbox/ (the logs and the private home's
    mount point, read-only to the app: a writable folder must not lie inside it)."""

    def __init__(self, run_root: Path, work: Path, output_dir: Path, device: str):
        self.root, self.work, self.output_dir = run_root, work, output_dir
        self.user = worker_identity() if _switch("GPUARENA_WORKER_ISOLATION", True) else None
        self.memory = default_memory_limit() if _switch("GPUARENA_WORKER_MEMORY_LIMIT", True) else None
        self.network_off = _switch("GPUARENA_WORKER_NETNS", True)
        self.gpu = device.startswith("cuda")
        self.folder = run_root / "sandbox"
        self.folder.mkdir(mode=0o711)
        self.home = self.folder / "home"
        self.home.mkdir(mode=0o700)
        self.io = run_root / "io"
        self.io.mkdir(mode=0o700)
        self.count = 0
        self.sandboxed = True
        """False if a run went without bubblewrap after all (WorkerProcess.sandbox_problem)."""
        self.rights = (
            "the app ran as the supervisor's user (no worker user of its own: gpuarena is not root, "
            "or no spare uid is mapped here)"
        )
        if self.user is not None:
            # the same test the sandbox's entry point makes before it drops the worker's rights
            self.rights = f"the app ran as uid {self.user[0]}, " + (
                "keeping only the read-search capability (the interpreter lies where only root may read)"
                if needs_read_search(self.user[0], self.user[1])
                else "without capabilities"
            )
        elif _switch("GPUARENA_WORKER_ISOLATION", True) is False:
            self.rights = "the app ran as the supervisor's user (GPUARENA_WORKER_ISOLATION=0)"
        self.containment = ""
        """How the last run was contained, for the record (WorkerProcess.containment and the user)."""
        if self.user is not None:
            os.chmod(run_root, 0o711)
            for folder in (self.home, self.io):
                os.chown(folder, self.user[0], self.user[1])
            self.give(work)

    def give(self, folder: Path) -> None:
        """Make folder and everything in it the app's user's (nothing to do without one)."""
        if self.user is None:
            return
        uid, gid = self.user[0], self.user[1]
        os.lchown(folder, uid, gid)
        for parent, dirs, files in os.walk(folder):
            for name in dirs + files:
                os.lchown(os.path.join(parent, name), uid, gid)


def run_sandboxed(command: list[str], box: Sandbox, env: dict[str, str], time_limit_s: float) -> tuple[RunResult, str]:
    """Run one command in the harness's sandbox as box's user (WorkerProcess with exec_argv);
    at the time limit, or once it exits, the sandbox and everything in it are killed."""
    box.count += 1
    paths = {name: box.io / f"{name}-{box.count}" for name in ("stdout", "stderr", "failed")}
    fds = {}
    try:
        for name, path in paths.items():
            fds[name] = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            if box.user is not None:
                os.fchown(fds[name], box.user[0], box.user[1])
        spec = {
            "stdout": str(paths["stdout"]),
            "stderr": str(paths["stderr"]),
            "failed": str(paths["failed"]),
            "cwd": str(box.work),
            "env": env,
            "unset": [n for n in THREAD_CAPS if n not in env],
            "argv": command,
        }
        launch = [sys.executable, "-c", _LAUNCH, json.dumps(spec)]
        protect_supervisor(True)
        try:
            start = time.perf_counter()
            try:
                worker = WorkerProcess(
                    box.home,
                    box.folder / f"run-{box.count}.log",
                    isolate_network=box.network_off,
                    memory_limit=box.memory,
                    user=box.user,
                    gpu=box.gpu,
                    exec_argv=launch,
                    writable=[str(box.work), str(box.output_dir), str(box.io)],
                )
            except OSError as exc:
                box.containment = f"bubblewrap: the sandbox could not start ({exc})"
                return RunResult(
                    command=command, exit_code=None, wall_s=0.0, stderr_tail=f"cannot start the sandbox: {exc}"
                ), ""
            try:
                timed_out = False
                try:
                    worker.proc.wait(timeout=time_limit_s)
                except subprocess.TimeoutExpired:
                    timed_out = True
                finally:
                    # bubblewrap's group: its init dies with it (--die-with-parent), and the
                    # PID namespace with its init, whatever the app started
                    try:
                        os.killpg(worker.proc.pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                    worker.proc.wait()
                wall = time.perf_counter() - start
                code = None if timed_out else worker.exit_code
                log = worker.read_log(TAIL_BYTES)
                box.containment = f"{worker.containment}; {box.rights}"
                if (
                    worker.sandbox_problem
                ):  # not after containment.sandbox_problem() said '' (the same cached test), but if so
                    box.sandboxed, box.containment = False, worker.containment
            finally:
                worker.close()
        finally:
            protect_supervisor(False)
        stdout = _tail_fd(fds["stdout"], STDOUT_SCAN_BYTES)
        stderr = _tail_fd(fds["stderr"], TAIL_BYTES)
        failed = _tail_fd(fds["failed"], 4000)
    finally:
        for fd in fds.values():
            os.close(fd)
    if failed and code == 127:
        return RunResult(command=command, exit_code=None, wall_s=wall, stderr_tail=failed), ""
    if log.strip():  # the sandbox's own words (a guard that failed before the app started)
        stderr = (stderr + "\n[gpuarena sandbox]\n" + log)[-TAIL_BYTES:]
    result = RunResult(
        command=command,
        exit_code=code,
        timed_out=timed_out,
        wall_s=wall,
        stdout_tail=stdout[-TAIL_BYTES:],
        stderr_tail=stderr,
    )
    return result, stdout
