"""The worker frozen between requests (harness/launch/freeze.py): a frozen process does no work at all,
whatever its threads do, through the cgroup's freezer where the machine gives one and SIGSTOP
elsewhere; a thawed one runs again."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gpuarena.harness.launch import cgroup
from gpuarena.harness.launch.freeze import Freezer, descendants
from gpuarena.harness.proctree import process_cpu_ns

pytestmark = pytest.mark.harness

SPINNER = """
import threading
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
spin()
"""


def _cpu_over(pid: int, seconds: float) -> int:
    before = process_cpu_ns(pid) or 0
    time.sleep(seconds)
    return (process_cpu_ns(pid) or 0) - before


def _spinner(group: cgroup.Cgroup | None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", SPINNER], preexec_fn=group.enter if group is not None and group.folders else None
    )


def _check_freezes(freezer: Freezer, pid: int) -> None:
    assert _cpu_over(pid, 0.2) > 50_000_000  # two spinning threads
    freezer.freeze()
    assert _cpu_over(pid, 0.3) < 5_000_000, f"a frozen worker ran ({freezer.method})"
    freezer.thaw()
    assert _cpu_over(pid, 0.2) > 50_000_000


def test_the_cgroup_freezer_stops_every_thread_and_thaws_them():
    group = cgroup.Cgroup.make(f"gpuarena-freeze-test-{os.getpid()}", None)
    if group.freezes is None:
        group.remove()
        pytest.skip("no cgroup freezer for the supervisor here (the SIGSTOP test covers the rest)")
    proc = _spinner(group)
    try:
        freezer = Freezer(group, lambda: descendants(proc.pid))
        assert freezer.method.startswith("cgroup")
        _check_freezes(freezer, proc.pid)
        freezer.freeze()  # a frozen worker is still killed, and its cgroup removed
    finally:
        group.remove()
        proc.wait(timeout=10)
    assert not any(folder.exists() for folder in group.folders.values())


def test_without_a_freezer_the_worker_is_stopped_by_signal():
    proc = _spinner(None)
    try:
        freezer = Freezer(None, lambda: descendants(proc.pid))
        assert freezer.method == "SIGSTOP"
        _check_freezes(freezer, proc.pid)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_the_worker_is_pinned_to_the_supervisors_cores_where_a_cpuset_is_given():
    group = cgroup.Cgroup.make(f"gpuarena-cpuset-test-{os.getpid()}", None)
    try:
        if not group.cores:
            pytest.skip("no cpuset for the supervisor here")
        assert group.cores == frozenset(os.sched_getaffinity(0))
        assert any(limit.startswith("cpuset") for limit in group.limits)
        # a process in the cpuset cannot widen its affinity beyond it
        code = "import os\ntry:\n    os.sched_setaffinity(0, range(os.cpu_count() * 4))\nexcept OSError:\n    pass\nprint(sorted(os.sched_getaffinity(0)))"
        out = subprocess.run(
            [sys.executable, "-c", code], preexec_fn=group.enter, capture_output=True, text=True, check=True
        ).stdout
        assert set(eval(out)) <= group.cores
    finally:
        group.remove()
