"""Process-level guards around the worker (Linux): no network, no orphans, no stray children.

The worker's entry point is this module, so the guards apply before torch or any solution
code is imported (a network namespace can only be entered while the process has one thread).
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


def isolate_network() -> bool:
    """Enter a fresh network namespace (only loopback, down): True where the platform allows it."""
    libc = _libc()
    return bool(libc) and libc.unshare(CLONE_NEWNET) == 0


def limit_resources(memory_bytes: int | None) -> None:
    """No core files; and, where given, a cap on the worker's private writable memory
    (RLIMIT_DATA covers heap and anonymous mappings), so exhausting memory ends in a
    MemoryError inside the worker instead of starving the machine."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_DATA, (memory_bytes, memory_bytes))


def default_memory_limit() -> int:
    """Half the machine's memory, at least 4 GiB: room for honest CPU work, none for a hog."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return max(4 << 30, total // 2)


def die_with_parent() -> None:
    libc = _libc()
    if libc:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def become_subreaper() -> None:
    """Make orphaned descendants (a solution's setsid or double-forked children) ours to reap."""
    libc = _libc()
    if libc:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)


def children_of(pid: int) -> set[int]:
    """Direct children of a process, from /proc (every thread's children list)."""
    found: set[int] = set()
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                found.update(int(c) for c in f.read().split())
        except OSError:
            pass
    return found


def kill_new_children(before: set[int], rounds: int = 20) -> int:
    """Kill and reap our children that were not there before (orphans handed to us as subreaper)."""
    import time

    killed = 0
    for _ in range(rounds):
        new = children_of(os.getpid()) - before
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        for pid in new:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        time.sleep(0.05)
    return killed


def main() -> None:
    """Usage: python -m gpuarena.harness.sandbox FD [--isolate-network] [--memory-limit BYTES]"""
    args = sys.argv[1:]
    network = "available"
    if "--isolate-network" in args:
        args.remove("--isolate-network")
        network = "isolated" if isolate_network() else "available"
    memory = None
    if "--memory-limit" in args:
        at = args.index("--memory-limit")
        memory = int(args[at + 1])
        del args[at:at + 2]
    limit_resources(memory)
    die_with_parent()
    from gpuarena.harness.worker import main as worker_main

    worker_main(args, network=network)


if __name__ == "__main__":
    main()
