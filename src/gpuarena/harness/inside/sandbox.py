"""Process-level guards around the worker (Linux): no network, no orphans, no stray children,
and none of the supervisor's rights.

The worker's entry point is this module, so the guards apply before torch or any solution
code is imported (a network namespace can only be entered while the process has one thread).

Rights: when the supervisor runs as root, the worker switches to an unprivileged user of its
own (a uid no other process uses, see `worker_identity`) before anything else runs, with
no capabilities (or, where the interpreter lives somewhere only root can reach, such as
/root/.pyenv, with CAP_DAC_READ_SEARCH alone, so that it can still read its own code), no
supplementary groups and no_new_privs. It can then neither read nor write the
supervisor's memory or environment, signal it, nor change its scheduling. A supervisor that
is not root cannot do that; it marks itself non-dumpable instead (`protect_supervisor`),
which keeps a same-user worker out of /proc/<supervisor>/mem and environ, but not from
signalling or renicing it: a deployment should run the harness as root (it drops the
worker's rights itself) or give the worker a user of its own some other way.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import threading

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_GET_DUMPABLE = 3
PR_SET_DUMPABLE = 4
PR_SET_KEEPCAPS = 8
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
CAP_DAC_READ_SEARCH = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

WORKER_UID_BASE = 1 << 30
"""Per-run worker uids are WORKER_UID_BASE + (supervisor pid << 8 | run number): unique among
live supervisors, never a real account's uid. GPUARENA_WORKER_UID (and GPUARENA_WORKER_GID)
name a dedicated user instead, e.g. one that owns persistent compile caches."""


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def isolate_network() -> bool:
    """Enter a fresh network namespace (only loopback, down): True where the platform allows it."""
    libc = _libc()
    return libc is not None and libc.unshare(CLONE_NEWNET) == 0


FILE_SIZE_LIMIT = 4 << 30
"""The largest file the worker may write (its log included: a seek to 1 TiB and a write end
the worker with SIGXFSZ instead of leaving the supervisor a sparse file to read)."""


def limit_resources(memory_bytes: int | None) -> None:
    """No core files, a file-size limit; and, where given, a cap on the worker's private
    writable memory (RLIMIT_DATA covers heap and anonymous mappings), so exhausting memory
    ends in a MemoryError inside the worker instead of starving the machine. (Shared memory
    and tmpfs files are counted only by the sandbox's cgroup, where there is one.)"""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_LIMIT, FILE_SIZE_LIMIT))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))


def default_memory_limit(total_bytes: int | None = None, gpus: int | None = None) -> int:
    """Half the machine's memory shared by the workers that may run on it at once (a runner
    has a slot per GPU), at least 4 GiB: room for honest CPU work, none for a hog. With half
    the machine each, two workers of a two-GPU runner could take all of it (a 64 GiB hog
    passed on a 251 GiB machine of two H200s, 2026-11-28)."""
    total = total_bytes if total_bytes is not None else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    workers = max(1, gpus if gpus is not None else machine_gpus())
    return max(4 << 30, total // 2 // workers)


def machine_gpus() -> int:
    """NVIDIA GPUs the machine has, whatever CUDA_VISIBLE_DEVICES shows this process (the
    driver's own list; 0 without the driver). Read without CUDA: the supervisor may not have
    initialised it yet."""
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def die_with_parent() -> None:
    libc = _libc()
    if libc:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper() -> None:
    """Make orphaned descendants (a solution's setsid or double-forked children) ours to reap."""
    libc = _libc()
    if libc:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)


# -- the worker's rights -----------------------------------------------------------------
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40


def _uid_mapped(uid: int) -> bool:
    """Whether uid exists in this user namespace (setuid to an unmapped uid fails)."""
    try:
        with open("/proc/self/uid_map") as f:
            for line in f:
                inside, _, count = (int(v) for v in line.split())
                if inside <= uid < inside + count:
                    return True
    except (OSError, ValueError):
        return uid == 65534
    return False


_run_counter = 0
_run_lock = threading.Lock()


def worker_identity() -> tuple[int, int, bool] | None:
    """(uid, gid, dedicated) for the next worker, or None when the supervisor cannot switch
    users (not root). gid is shared by the workers of this supervisor process (it only owns
    files the harness shares with them); the uid is new for every run, so workers of
    concurrent runs cannot signal or trace one another. dedicated: the deployment named
    the user (GPUARENA_WORKER_UID), whose caches are then kept."""
    global _run_counter
    if os.geteuid() != 0:
        return None
    named = os.environ.get("GPUARENA_WORKER_UID")
    if named:
        uid = int(named)
        return uid, int(os.environ.get("GPUARENA_WORKER_GID", uid)), True
    with _run_lock:
        _run_counter = _run_counter % 255 + 1
        run = _run_counter
    base = WORKER_UID_BASE + ((os.getpid() & 0x3FFFFF) << 8)
    if _uid_mapped(base + run):
        return base + run, base, False
    if _uid_mapped(65534):
        return 65534, 65534, False
    return None


def _reachable(path: str, uid: int, gid: int) -> bool:
    """Whether uid/gid, without capabilities, can reach path: search permission on every
    folder above it, and read (and search, for a folder) on it."""
    path = os.path.realpath(path)
    chain = [path]
    while chain[-1] != os.sep:
        chain.append(os.path.dirname(chain[-1]))
    for current in chain:
        try:
            st = os.stat(current)
        except OSError:
            continue
        is_dir = os.path.isdir(current)
        need = (0o5 if is_dir else 0o4) if current == path else 0o1
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        if (st.st_mode >> shift) & need != need:
            return False
    return True


def needs_read_search(uid: int, gid: int) -> bool:
    """Whether the worker, as uid/gid, would be unable to read the interpreter or the packages
    it imports (an interpreter under /root, say): then it keeps CAP_DAC_READ_SEARCH."""
    import gpuarena

    paths = [sys.executable, sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(gpuarena.__file__))]
    paths += [p for p in sys.path if p and os.path.isdir(p)]
    return not all(_reachable(p, uid, gid) for p in paths)


def drop_privileges(uid: int, gid: int, read_search: bool) -> str:
    """Become uid/gid with no supplementary groups, no capabilities (but CAP_DAC_READ_SEARCH
    where read_search), an empty bounding set and no_new_privs (setuid binaries and file
    capabilities give nothing back). Returns how the worker runs, for the record."""
    libc = _libc()
    if libc is None:
        raise OSError("no libc: cannot drop the worker's rights")
    for cap in range(_last_cap() + 1):
        if not (read_search and cap == CAP_DAC_READ_SEARCH):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    if read_search and libc.prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_KEEPCAPS)")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if read_search:
        header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
        bit = 1 << CAP_DAC_READ_SEARCH
        data = (_CapData * 2)(_CapData(bit, bit, bit), _CapData(0, 0, 0))
        if libc.capset(ctypes.byref(header), data) != 0:
            raise OSError(ctypes.get_errno(), "capset")
        # ambient: compilers and other programs the solution runs can read their files too
        libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0)
        libc.prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # other workers of a shared user cannot trace it
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise OSError("the worker's user did not change")
    return f"uid {uid}" + (" (read-search capability only)" if read_search else " (no capabilities)")


_protect_lock = threading.Lock()
_protect_depth = 0
_protect_saved = 1


def protect_supervisor(on: bool) -> None:
    """Mark this process non-dumpable while at least one run wants it (on), and back to what
    it was when the last one is done (off): /proc/<pid>/mem, environ and maps then need
    CAP_SYS_PTRACE, which a worker never has, even as the same user."""
    global _protect_depth, _protect_saved
    libc = _libc()
    if libc is None:
        return
    with _protect_lock:
        if on:
            if _protect_depth == 0:
                _protect_saved = libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
                libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
            _protect_depth += 1
        elif _protect_depth > 0:
            _protect_depth -= 1
            if _protect_depth == 0 and _protect_saved == 1:
                libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)


def _option(args: list[str], name: str) -> str | None:
    if name not in args:
        return None
    at = args.index(name)
    value = args[at + 1]
    del args[at : at + 2]
    return value


def main() -> None:
    """Usage: python -m gpuarena.harness.inside.sandbox FD [--isolate-network] [--memory-limit BYTES]
    [--user UID:GID] [--warm-triton] [--context-ahead ORDINAL] [--exec PROGRAM ARG...]

    --warm-triton: compute Triton's cache key while the worker imports (harness/inside/triton_key.py).
    --context-ahead: make CUDA device ORDINAL's context while the worker imports (context_ahead.py).
    --exec: once the guards are applied, replace this process with PROGRAM instead of serving
    the harness's requests (profile mode: Nsight Compute, which starts the solution's process
    under the same guards: the user, the limits and the subreaper flag survive exec)."""
    from gpuarena.harness.inside import context_ahead, triton_key  # torch-free, as this module

    args = sys.argv[1:]
    program: list[str] = []
    if "--exec" in args:
        at = args.index("--exec")
        args, program = args[:at], args[at + 1 :]
    network = "available"
    if "--isolate-network" in args:
        args.remove("--isolate-network")
        network = "isolated" if isolate_network() else "available"
    memory = _option(args, "--memory-limit")
    limit_resources(int(memory) if memory else None)
    user = _option(args, "--user")
    rights = "same user as the supervisor"
    if user:
        uid, gid = (int(v) for v in user.split(":"))
        rights = drop_privileges(uid, gid, needs_read_search(uid, gid))
    if os.environ.get("TMPDIR"):
        os.makedirs(os.environ["TMPDIR"], exist_ok=True)
    # after the user change (which clears it): the worker dies with the supervisor
    die_with_parent()
    # orphans of the solution (double forks, setsid daemons) come back to the worker, where
    # the per-call check sees them
    become_subreaper()
    if program:
        sys.stdout.flush()
        os.execvp(program[0], program)
    if triton_key.FLAG in args:
        args.remove(triton_key.FLAG)
        triton_key.start()  # before the worker's imports, which it overlaps
    ordinal = _option(args, context_ahead.FLAG)
    if ordinal is not None:
        context_ahead.start(int(ordinal))  # so does the device's context
    from gpuarena.harness.inside.worker import main as worker_main

    worker_main(args, network=network, rights=rights)


if __name__ == "__main__":
    main()
