"""Issue 46: a job's processes (the job process, its supervisor's sandbox and worker, whatever
the solution started) die with the `gpuarena runner` that started them: killed with SIGKILL,
the runner leaves nothing of the job running; stopped with SIGTERM, it stops them and gives
the job back. Real processes: `gpuarena serve --no-runner` and `gpuarena runner`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from tests.service.conftest import _postgres_database, submission_body
from tests.service.processes import Server, _cli, _wait_for

pytestmark = pytest.mark.e2e

LOOPS_FOREVER = "def solve(a, x, b, y):\n    while True:\n        pass\n"
LOOPS_WITH_A_DAEMON = (
    "import subprocess\nimport sys\n\n\ndef solve(a, x, b, y):\n"
    "    subprocess.Popen([sys.executable, '-c', 'import signal, time\\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\nwhile True: time.sleep(1)'], start_new_session=True)\n"
    "    while True:\n        pass\n"
)
"""Also leaves a process of its own session that ignores SIGTERM (the harness's own check would
find it only once solve() returned, which it never does)."""


def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> set[tuple[int, str]]:
    """The live processes below root, each as (pid, start time): a pid reused later is not them."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))) and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            fields = _stat(child)
            if fields:
                found.add((child, fields[19]))
            todo.append(child)
    return found


def _alive(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    return {(pid, start) for pid, start in processes if (f := _stat(pid)) and f[19] == start and f[0] != "Z"}


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request, env) -> Iterator[tuple[Server, dict]]:
    if request.param == "postgresql":
        databases = _postgres_database()
        env["GPUARENA_DATABASE_URL"] = next(databases)
    served = Server(env, "--no-runner")
    yield served, env
    served.stop()
    if request.param == "postgresql":
        databases.close()


def _running_job(server: Server, env: dict, source: str) -> tuple[subprocess.Popen, httpx.Client, int, set]:
    """A runner running source's job; the job's processes once its worker and what the
    solution starts exist."""
    alice = _cli("users", "add", "alice", env=env).stdout.split()[-1]
    box = _cli("users", "add", "box", "--role", "runner", env=env).stdout.split()[-1]
    runner = subprocess.Popen(
        [sys.executable, "-m", "gpuarena.cli", "runner", "--name", "box", "--server", server.url, "--devices", "cpu"],
        env={**env, "GPUARENA_TOKEN": box},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {alice}"}, timeout=30)
    _wait_for(lambda: any(k["name"] == "cpu" for k in http.get("/api/device-kinds").json()), what="the runner")
    made = http.post("/api/submissions", json=submission_body(mode="test", source=source))
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    _wait_for(lambda: http.get(f"/api/submissions/{sid}").json()["status"] == "RUNNING", what="the job to start")
    daemon = "SIG_IGN" in source

    def started() -> bool:
        lines = [_cmdline(pid) for pid, _ in _descendants(runner.pid)]
        worker = any("gpuarena.harness.inside" in line for line in lines)
        return worker and (not daemon or any("SIG_IGN" in line for line in lines))

    _wait_for(started, 120, "the job's worker (and what the solution starts)")
    processes = _descendants(runner.pid)
    assert len(processes) >= 2  # the job process, the worker (and bubblewrap around it)
    return runner, http, sid, processes


def _wait_gone(processes: set[tuple[int, str]], timeout: float = 10) -> set[tuple[int, str]]:
    deadline = time.monotonic() + timeout
    while (left := _alive(processes)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid, _ in left:  # leave nothing behind for the next test
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return left


@pytest.mark.parametrize("source", [LOOPS_FOREVER, LOOPS_WITH_A_DAEMON], ids=["loop", "loop-and-daemon"])
def test_the_jobs_processes_die_with_a_killed_runner(server, source: str) -> None:
    served, env = server
    runner, _, _, processes = _running_job(served, env, source)
    runner.kill()
    runner.wait(timeout=30)
    left = _wait_gone(processes)
    assert not left, [f"{pid}: {_cmdline(pid)}" for pid, _ in left]


JOB_PROCESS = """
import os, subprocess, sys, time
from gpuarena.runner.execute import watch_the_runner
watch_the_runner()
# what a build step or the harness starts and then loses track of: its own session, deaf to SIGTERM
subprocess.Popen([sys.executable, "-c", "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
                  "while True: time.sleep(1)"], start_new_session=True)
print("started", flush=True)
time.sleep(600)
"""

RUNNER = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", sys.argv[1]], env={**os.environ, "GPUARENA_RUNNER_PID": str(os.getpid())},
                 start_new_session=True)
time.sleep(600)
"""


def test_nothing_below_a_job_process_outlives_its_runner(env) -> None:
    """Whatever a job process started, its own session or not, dies with the runner at once,
    whatever the job process's main thread is doing (here: sleeping, not unwinding)."""
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, JOB_PROCESS], env=env)
    try:
        _wait_for(lambda: len(_descendants(runner.pid)) == 2, 60, "the job process and what it started")
        processes = _descendants(runner.pid)
        assert len(processes) == 2
    finally:
        runner.kill()
        runner.wait(timeout=30)
    left = _wait_gone(processes)
    assert not left, [f"{pid}: {_cmdline(pid)}" for pid, _ in left]


def test_a_stopped_runner_stops_its_jobs_processes_and_gives_the_job_back(server) -> None:
    served, env = server
    runner, http, sid, processes = _running_job(served, env, LOOPS_WITH_A_DAEMON)
    runner.send_signal(signal.SIGTERM)
    assert runner.wait(timeout=60) == 0
    left = _wait_gone(processes)
    assert not left, [f"{pid}: {_cmdline(pid)}" for pid, _ in left]
    shown = http.get(f"/api/submissions/{sid}").json()
    assert shown["status"] == "QUEUED" and shown["evaluation"] is None  # given back, runs again elsewhere
