"""A worker started before its run (StartedWorker, what a runner's job process makes while it
waits for a job): the run uses it and cleans it up, replaces it when it died or was set up
with other guards, and a solution still gets a worker no other run has used."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.launch.started import StartedWorker
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

pytestmark = pytest.mark.harness

AXPY = FIXTURES / "problems" / "axpy_dest"

# prints the pid of the process that runs it, so a test can tell which worker ran the solution
PID_PRINTER = """import os
import torch

print("solution-runs-in", os.getpid(), flush=True)


def solve(a, x, b, y):
    torch.addcmul(b, a, x, out=y)
"""


def _run(solution: Path, worker: StartedWorker | None = None, **options):
    return evaluate(
        load_problem(AXPY), load_solution(solution), RunOptions(device="cpu", mode="test", **options), worker=worker
    )


def _solution_pid(log: str) -> int:
    (line,) = [line for line in log.splitlines() if line.startswith("solution-runs-in")]
    return int(line.split()[1])


def test_a_run_uses_the_worker_started_ahead_and_cleans_it_up(tmp_path) -> None:
    solution = tmp_path / "pid_printer.py"
    solution.write_text(PID_PRINTER)
    started = StartedWorker()
    folder = Path(started._folder.name)
    record = _run(solution, started)
    assert record.status == "PASSED", record.reason
    # in a sandbox the worker is pid 2 of its own PID namespace (bubblewrap is its init)
    expected = 2 if started.process.init_pid is not None else started.process.proc.pid
    assert _solution_pid(record.log) == expected
    assert not started.alive() and not folder.exists()


def test_a_worker_that_died_while_waiting_is_replaced(tmp_path) -> None:
    solution = tmp_path / "pid_printer.py"
    solution.write_text(PID_PRINTER)
    started = StartedWorker()
    os.kill(started.process.proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while started.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    record = _run(solution, started)
    assert record.status == "PASSED", record.reason  # not a RUNTIME_ERROR blamed on the solution
    assert _solution_pid(record.log) != started.process.proc.pid
    assert not Path(started._folder.name).exists()


def test_a_worker_started_with_other_guards_is_replaced(tmp_path) -> None:
    solution = tmp_path / "pid_printer.py"
    solution.write_text(PID_PRINTER)
    started = StartedWorker(memory_limit_bytes=8 << 30)
    record = _run(solution, started, memory_limit_bytes=6 << 30)
    assert record.status == "PASSED", record.reason
    assert _solution_pid(record.log) != started.process.proc.pid
    assert not started.alive() and not Path(started._folder.name).exists()


def test_failing_solution_in_a_worker_started_ahead_keeps_its_verdict_and_log(tmp_path) -> None:
    solution = tmp_path / "raises.py"
    solution.write_text('def solve(a, x, b, y):\n    raise ValueError("boom in a started worker")\n')
    record = _run(solution, StartedWorker())
    assert record.status == "RUNTIME_ERROR" and "boom in a started worker" in record.reason
    assert "Traceback" in record.log and "worker rights" in record.log
