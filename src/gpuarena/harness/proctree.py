"""Processes read from outside, through /proc: a process's children, its CPU time as the
kernel counts it, and the reaping of orphans handed to a subreaper. The supervisor, the
worker's own checks and the trusted twin all read processes this way; kept apart from the
sandbox (which starts the worker) so that the worker can use it without importing its own
launcher."""

from __future__ import annotations

import os
import signal
import time


def states(folder: str) -> dict[int, str] | None:
    """Every process (a /proc folder) or thread (a /proc/<pid>/task folder) listed in folder:
    its id -> its state letter; None where the folder cannot be listed. An entry gone between
    the listing and the read is left out."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    found: dict[int, str] = {}
    for name in names:
        if name.isdigit():
            try:
                with open(f"{folder}/{name}/stat") as f:
                    found[int(name)] = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                pass
    return found


def children_of(pid: int) -> set[int]:
    """Direct children of a process, from /proc (every thread's children list)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return set()
    return set().union(*(children_of_thread(pid, int(tid)) for tid in tasks))


def children_of_thread(pid: int, tid: int) -> set[int]:
    """The children one thread of a process started, from /proc."""
    try:
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            return {int(c) for c in f.read().split()}
    except OSError:
        return set()


HARNESS_PROCESSES: set[int] = set()
"""Children of the supervisor that are the harness's own and outlive a run (the device audit's
PM sampler, kept between jobs): never taken for a worker's orphans."""


def namespace_depth(pid: int) -> int | None:
    """How many PID namespaces deep a process is, as this /proc sees it (its NSpid entries):
    a sandboxed worker's processes are one deeper than the supervisor's own children."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return len(line.split()) - 1
    except OSError:
        return None
    return None


def kill_new_children(before: set[int], rounds: int = 20, sandboxed_only: bool = False) -> int:
    """Kill and reap our children that were not there before (orphans handed to us as subreaper).
    sandboxed_only: only those from a deeper PID namespace (a sandbox's, handed to us when its
    init died), never a process of the supervisor's own started meanwhile (nvidia-smi, a
    compiler), for a teardown that runs while the next job does."""
    killed = 0
    own_depth = namespace_depth(os.getpid()) if sandboxed_only else None
    for _ in range(rounds):
        new = children_of(os.getpid()) - before
        if sandboxed_only:
            new = {pid for pid in new if (namespace_depth(pid) or 0) > (own_depth or 0)}
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


def process_cpu_ns(pid: int) -> int | None:
    """CPU time of a whole process (all its threads, live and exited), plus that of the
    children it has reaped, read from outside it: the kernel's account, which nothing in
    that process can rewrite. (Reaped children count in clock ticks: work moved into a
    short-lived child process is seen, coarsely.)"""
    try:
        own = time.clock_gettime_ns(((~pid) << 3) | 2)  # the process's CPUCLOCK_SCHED clock
    except OSError:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        children = (int(fields[13]) + int(fields[14])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        children = 0
    return own + children


def describe_exit(code: int | None) -> str:
    """A process's exit status as Popen gives it (negative: the signal that killed it), in words."""
    if code is None:
        return "is still running"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with status {code}"
