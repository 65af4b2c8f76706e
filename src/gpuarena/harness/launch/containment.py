"""The worker's sandbox, seen from the supervisor: bubblewrap namespaces and a cgroup.

Guards inside the worker's own process (thread lists, subreaper flags) can be undone by the
solution, which shares that process. What this module sets up cannot:

- **A PID namespace** (bubblewrap's `--unshare-pid`). Every process the solution starts,
  double-forked or not, lives in it and dies with it (its init is bubblewrap, which exits,
  killing the namespace, when the worker does). The supervisor counts the namespace's
  processes from outside after every request, through the namespace's own /proc
  (`/proc/<init>/root/proc`), so a process left running fails the run whatever the solution
  did to the worker's subreaper flag.
- **A view of the file system** with only what the worker needs, read-only: the system's
  libraries and tools (/usr, /etc, ...), the Python installation and its packages, CUDA,
  the GPU's device files on CUDA runs only, and the run's folder. It writes only its own
  folder and a private, size-limited /dev/shm and /tmp. The server's home, databases,
  tokens, other runs' folders and the repository do not exist in it.
- **Network, IPC and hostname namespaces** of its own (no network unless asked).
- **A cgroup** (cgroup.py) where this machine lets the supervisor make one (v2, or v1's memory, pids and
  cpuacct hierarchies): a memory limit that counts every kind of memory (shared anonymous,
  tmpfs files), a process limit, and CPU time of everything in it, read from outside.
  Where no cgroup counts memory (cgroup v2 without the memory controller delegated, as on
  the lent H100; or `GPUARENA_SANDBOX_CGROUP=0`), `MemoryWatch` looks from outside instead.

Where bubblewrap is missing or cannot run (a kernel without user namespaces for a normal
user, say) the worker runs without it and the record says so (`Containment.describe`); the
in-process guards and the per-run user then remain, with the limits docs/harness.md lists.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from gpuarena.cache import cache_dir
from gpuarena.harness.proctree import states

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt/conda")
"""System folders the worker may read (libraries, compilers, ld.so's cache, locales)."""

PRIVATE_ETC = ("/etc/gpuarena", "/etc/shadow", "/etc/gshadow", "/etc/ssh", "/etc/ssl/private")
"""Parts of /etc hidden from the worker (an empty folder or /dev/null is mounted over them)."""

DEFAULT_TMPFS_BYTES = 2 << 30
"""Size of the worker's private /dev/shm and /tmp, each, unless its memory limit is lower."""


def bwrap_path() -> str | None:
    """bubblewrap's binary, unless turned off (GPUARENA_SANDBOX=0)."""
    if os.environ.get("GPUARENA_SANDBOX", "").strip().lower() in ("0", "off", "false", "no"):
        return None
    return shutil.which("bwrap")


_BWRAP_WORKS: dict[str, str] = {}


def bwrap_problem(binary: str) -> str:
    """Why bubblewrap cannot make a sandbox here ('' when it can): tried once per process."""
    if binary not in _BWRAP_WORKS:
        try:
            probe = subprocess.run(
                _namespace_args(binary, network=True) + ["--ro-bind", "/", "/", "--proc", "/proc", "--", "true"],
                capture_output=True,
                timeout=30,
            )
            _BWRAP_WORKS[binary] = (
                ""
                if probe.returncode == 0
                else (probe.stderr.decode(errors="replace").strip()[:300] or f"bwrap exited with {probe.returncode}")
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _BWRAP_WORKS[binary] = str(exc)
    return _BWRAP_WORKS[binary]


def sandbox_problem() -> str:
    """Why a worker cannot run in the sandbox here ('' when it can): bubblewrap on PATH, not
    turned off (GPUARENA_SANDBOX=0), and able to make a sandbox."""
    binary = bwrap_path()
    if binary:
        return bwrap_problem(binary)
    return "turned off (GPUARENA_SANDBOX=0)" if shutil.which("bwrap") else "bubblewrap (bwrap) is not installed"


def _namespace_args(binary: str, network: bool) -> list[str]:
    args = [
        binary,
        "--die-with-parent",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--hostname",
        "gpuarena-worker",
        "--unshare-cgroup-try",
    ]
    if network:
        args.append("--unshare-net")
    if os.geteuid() != 0:
        args.append("--unshare-user")  # a normal user's bubblewrap needs a user namespace
    return args


_WORKER_SYS_PATH: list[str] | None = None


def _worker_sys_path(env: dict[str, str]) -> list[str]:
    """The import path a fresh interpreter has with the worker's environment: not this
    process's sys.path, which may hold the current folder or a test runner's root. Asking
    one costs an interpreter's start (70 ms on the 2-core VM, on the critical path of every
    one-shot `gpuarena run`), so the answer is kept on disk for as long as the interpreter,
    PYTHONPATH and the site folders with their .pth files are unchanged."""
    global _WORKER_SYS_PATH
    if _WORKER_SYS_PATH is None:
        key = _sys_path_key(env)
        kept = cache_dir() / "worker-sys-path.json"
        try:
            stored = json.loads(kept.read_text())
            if stored.get("key") == key and all(isinstance(p, str) for p in stored["path"]):
                _WORKER_SYS_PATH = list(stored["path"])
                return _WORKER_SYS_PATH
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass
        try:
            out = subprocess.run(
                [
                    sys.executable,
                    "-I" if not env.get("PYTHONPATH") else "-s",
                    "-c",
                    "import sys, json; print(json.dumps(sys.path))",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                env=env,
                cwd="/",
            )
            _WORKER_SYS_PATH = [p for p in json.loads(out.stdout) if p]
        except (OSError, ValueError, subprocess.TimeoutExpired):
            _WORKER_SYS_PATH = []
            return _WORKER_SYS_PATH
        try:
            kept.parent.mkdir(parents=True, exist_ok=True)
            temporary = kept.with_name(f"{kept.name}.{os.getpid()}")
            temporary.write_text(json.dumps({"key": key, "path": _WORKER_SYS_PATH}))
            temporary.replace(kept)
        except OSError:
            pass
    return _WORKER_SYS_PATH


def _sys_path_key(env: dict[str, str]) -> str:
    """What a fresh interpreter's import path follows from: the interpreter, PYTHONPATH, and
    each site folder's entries with their times (installing a package or an editable .pth
    changes them)."""
    parts = [os.path.realpath(sys.executable), sys.version, env.get("PYTHONPATH", "")]
    for name in ("purelib", "platlib"):
        try:
            folder = sysconfig.get_path(name)
        except KeyError:
            continue
        try:
            parts.append(f"{folder}:{os.stat(folder).st_mtime_ns}")
            with os.scandir(folder) as entries:
                parts.extend(f"{e.name}:{e.stat().st_mtime_ns}" for e in entries if e.name.endswith(".pth"))
        except OSError:
            parts.append(f"{folder}:missing")
    return "\n".join(sorted(parts))


def _python_paths(env: dict[str, str]) -> list[str]:
    """Folders holding the interpreter, its standard library and every package it imports."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for name in ("stdlib", "platstdlib", "purelib", "platlib", "include"):
        try:
            paths.add(sysconfig.get_path(name))
        except KeyError:
            pass
    paths.update(p for p in _worker_sys_path(env) if os.path.isdir(p) and p != "/")
    import gpuarena
    from gpuarena.bundled import bundled_root

    paths.add(os.path.dirname(os.path.dirname(os.path.abspath(gpuarena.__file__))))
    paths.add(str(bundled_root()))  # public already: the bundled problems (an editable install's problems/)
    return sorted(os.path.realpath(p) for p in paths if p and os.path.isdir(p))


TEMPORARY_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")
"""Folders anyone may write: a PATH entry there is no installation, and is never shown."""

COMPILERS = ("gcc", "g++", "cc", "c++")
"""Compilers the worker may call (Triton, torch's inductor and extensions build with them)."""


def _personal(path: str) -> bool:
    """A home, a temporary folder or the root: never shown whole for a tool."""
    roots = ("/root", "/home", os.path.realpath(os.path.expanduser("~")), *TEMPORARY_ROOTS)
    return path in ("/", "") or any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


@functools.lru_cache(maxsize=16)
def _compiler_root(compiler: str) -> str | None:
    """The installation a compiler says it runs from (`-print-search-dirs`: its cc1, its
    libraries and headers beside its bin), e.g. /opt/gcc for /opt/gcc/bin/gcc; None if it
    does not say."""
    try:
        said = subprocess.run(
            [compiler, "-print-search-dirs"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in said.splitlines():
        if line.startswith("install:") and "/lib/gcc/" in line:
            return os.path.realpath(line.split(":", 1)[1].strip().split("/lib/gcc/", 1)[0] or "/")
    return None


def _tool_paths(env: dict[str, str]) -> list[str]:
    """Where the programs the worker may run live: each folder on its PATH as itself (never its
    parent: a PATH entry `X/bin` must not show the whole of X), none in a home or a temporary
    folder; the installation each compiler it may call names itself (a gcc in /opt/gcc/bin
    needs /opt/gcc/libexec and lib); and the whole installations a deployment names in
    GPUARENA_SANDBOX_TOOLS (colon-separated). The system folders, the Python environment and
    CUDA's toolkit are shown in their own right (SYSTEM_PATHS, _python_paths, _cuda_paths)."""
    path = env.get("PATH", "")
    folders = [p for p in path.split(":") if p]
    compilers = [env[v] for v in ("CC", "CXX") if os.path.isabs(env.get(v, ""))]
    compilers += [where for name in COMPILERS if (where := shutil.which(name, path=path))]
    folders += [os.path.dirname(c) for c in compilers]
    found = [real for real in (os.path.realpath(f) for f in folders) if not _personal(real)]
    for compiler in dict.fromkeys(os.path.realpath(c) for c in compilers):
        root = _compiler_root(compiler)
        if root is not None and not _personal(root):
            found.append(root)
    found += [os.path.realpath(p) for p in os.environ.get("GPUARENA_SANDBOX_TOOLS", "").split(":") if p]
    return [f for f in dict.fromkeys(found) if f not in ("/", "") and os.path.isdir(f)]


def _cuda_paths() -> list[str]:
    found = [os.environ[v] for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    found += [str(p) for p in Path("/usr/local").glob("cuda*")]
    return found


def _outside(path: str, folders: list[str]) -> bool:
    return not any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _service_data(readable: list[str]) -> list[str]:
    """gpuarena's data folders (database, tokens, web key) that fall inside a folder the worker
    may read (a checkout on PYTHONPATH holds `.gpuarena/`, serve.sh's home): hidden under an
    empty tmpfs, whatever their modes."""
    candidates = [os.environ.get("GPUARENA_HOME", ""), os.path.expanduser("~/.gpuarena")]
    candidates += [os.path.join(folder, ".gpuarena") for folder in readable]
    candidates += [os.path.join(os.path.dirname(folder), ".gpuarena") for folder in readable]
    found = []
    for path in candidates:
        real = os.path.realpath(path) if path else ""
        if real and os.path.isdir(real) and not _outside(real, readable) and real not in found:
            found.append(real)
    return found


def shared_folders(env: dict[str, str], dedicated: bool, cache_variables: list[str]) -> list[str]:
    """Folders the worker may write besides its own: those the deployment names in
    GPUARENA_SANDBOX_SHARE (colon-separated), and a dedicated worker user's compile caches."""
    named = [p for p in os.environ.get("GPUARENA_SANDBOX_SHARE", "").split(":") if p]
    if dedicated:
        named += [env[v] for v in cache_variables if env.get(v)]
    return [os.path.realpath(p) for p in named if os.path.isdir(p)]


def sandbox_argv(
    binary: str,
    run_folder: Path,
    workdir: Path,
    gpu: bool,
    network: bool,
    tmpfs_bytes: int,
    env: dict[str, str],
    shared: Sequence[str] = (),
    readable: Sequence[str] = (),
    gpu_files: Sequence[str] = (),
    gpu_hidden: Sequence[str] = (),
) -> list[str]:
    """bubblewrap's command line for a worker (env: the worker's environment; shared: folders
    it may write besides its own; readable: more it may read, such as Nsight Compute's
    installation in profile mode; gpu_files: the device files of its GPUs; gpu_hidden: the host's
    other GPUs' folders in /sys and /proc, shown empty; both from gpu_view.py): what it sees, and
    nothing else."""
    args = _namespace_args(binary, network)
    extra, readable = list(readable), []
    for path in [*SYSTEM_PATHS, *_python_paths(env), *_tool_paths(env), *(_cuda_paths() if gpu else []), *extra]:
        real = os.path.realpath(path)
        if os.path.exists(real) and _outside(real, readable):
            readable.append(real)
    # first the private /tmp and /dev/shm, so that what is bound below them later (packages on
    # a PYTHONPATH under /tmp, the run's folder) shows through
    args += ["--proc", "/proc", "--dev", "/dev"]
    for private in ("/dev/shm", "/tmp"):
        args += ["--perms", "1777", "--size", str(tmpfs_bytes), "--tmpfs", private]
    # the folders above what is bound, searchable by the worker's user (bubblewrap would make
    # them 0700, and an unprivileged worker could not reach its own interpreter)
    above = sorted(
        {
            str(parent)
            for path in [*readable, *shared, str(run_folder)]
            for parent in Path(path).parents
            if str(parent) != "/"
        },
        key=lambda p: p.count("/"),
    )
    for folder in above:
        args += ["--perms", "0755", "--dir", folder]
    for real in readable:
        args += ["--ro-bind", real, real]
    for path in SYSTEM_PATHS:
        if os.path.islink(path):  # /lib -> usr/lib on merged-/usr systems: ld.so is found by that name
            args += ["--symlink", os.readlink(path), path]
    for hidden in [*PRIVATE_ETC, *_service_data(readable)]:
        if os.path.isdir(hidden):
            args += ["--tmpfs", hidden]
        elif os.path.exists(hidden):
            args += ["--ro-bind", "/dev/null", hidden]
    if gpu:
        for device in gpu_files:
            args += ["--dev-bind", device, device]
        if os.path.isdir("/sys"):
            args += ["--ro-bind", "/sys", "/sys"]  # the CUDA driver reads the PCI topology
        for folder in gpu_hidden:  # after /proc and /sys: mounted over what they show
            args += ["--tmpfs", folder]
    else:
        for folder in ("/sys/devices/system/cpu", "/sys/fs/cgroup"):
            if os.path.isdir(folder):
                args += ["--ro-bind", folder, folder]  # CPU counts and limits, for thread pools
    # the run's folder read-only (the range timer's library is copied there); the worker's own
    # folder inside it a private tmpfs of limited size: what it writes is counted as its
    # memory and is gone with it
    for folder in shared:
        args += ["--bind", folder, folder]
    args += [
        "--ro-bind",
        str(run_folder),
        str(run_folder),
        "--perms",
        "0777",
        "--size",
        str(tmpfs_bytes),
        "--tmpfs",
        str(workdir),
        "--chdir",
        str(workdir),
    ]
    return args


def read_info(path: Path, proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """The pid (in our namespace) of the sandbox's init, from bubblewrap's --info-fd file."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
            if text.strip().endswith("}"):
                return int(json.loads(text)["child-pid"])
        except (OSError, ValueError, KeyError):
            pass
        if proc.poll() is not None:
            raise OSError(f"bubblewrap exited with status {proc.returncode} before the worker started")
        time.sleep(0.005)
    raise OSError("bubblewrap did not report its sandbox in time")


def namespace_processes(init_pid: int) -> dict[int, str] | None:
    """Every live process in the sandbox's PID namespace: namespace pid -> state letter, read
    through the namespace's own /proc from outside. None when it cannot be read."""
    return states(f"/proc/{init_pid}/root/proc")


def namespace_threads(init_pid: int, ns_pid: int) -> set[int] | None:
    """Live thread ids of one process of the sandbox (its /proc/<pid>/task, less threads that
    are exiting), from outside."""
    found = states(f"/proc/{init_pid}/root/proc/{ns_pid}/task")
    return None if found is None else {tid for tid, state in found.items() if state not in ("Z", "X")}


class MemoryWatch:
    """The memory limit where no cgroup counts memory: a thread of the supervisor's sums the
    resident anonymous and shared memory (RssAnon + RssShmem: heap, anonymous and shared
    mappings, mapped tmpfs files) of every process in the sandbox every INTERVAL_S, through
    the namespace's /proc from outside, and kills the sandbox above the limit. Coarser than
    `memory.max`: memory touched faster than the interval overshoots until the next look, and
    tmpfs files nobody maps count only against their own size limits."""

    INTERVAL_S = 0.05

    def __init__(self, init_pid: int, limit_bytes: int):
        self.init_pid, self.limit_bytes = init_pid, limit_bytes
        self.exceeded_bytes = 0
        """What the sandbox held when it was killed for it (0: never)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gpuarena-memory-watch", daemon=True)
        self._thread.start()

    def resident_bytes(self) -> int:
        total = 0
        for ns_pid in namespace_processes(self.init_pid) or {}:
            try:
                with open(f"/proc/{self.init_pid}/root/proc/{ns_pid}/status") as f:
                    for line in f:
                        if line.startswith(("RssAnon:", "RssShmem:")):
                            total += int(line.split()[1]) * 1024
            except (OSError, ValueError, IndexError):
                continue  # gone between the listing and the read
        return total

    def _watch(self) -> None:
        while not self._stop.wait(self.INTERVAL_S):
            used = self.resident_bytes()
            if used > self.limit_bytes:
                self.exceeded_bytes = used
                try:
                    os.kill(self.init_pid, signal.SIGKILL)  # the namespace's init: everything in it dies
                except (ProcessLookupError, PermissionError):
                    pass
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)
