"""The warm path's keeping between jobs (harness/warm.py): a worker prepared ahead is used
without a second `prepare`, a finished worker is torn down in the background but never while
a job times, and a kept sampler whose process died is not handed out."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import FIXTURES
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.launch import process
from gpuarena.harness.launch.started import StartedWorker
from gpuarena.harness.warm import GpuLock, Warm
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

AXPY = FIXTURES / "problems" / "axpy_dest"
SOLUTION = """import torch


def solve(a, x, b, y):
    torch.addcmul(b, a, x, out=y)
"""


def _requests(monkeypatch) -> list[str]:
    """The ops the supervisor sends, in order (from the main thread only)."""
    sent: list[str] = []
    original = process.WorkerProcess.request

    def request(self, message, *args, **kwargs):
        if threading.current_thread() is threading.main_thread():
            sent.append(message.op)
        return original(self, message, *args, **kwargs)

    monkeypatch.setattr(process.WorkerProcess, "request", request)
    return sent


def _judged_with_a_prepared_worker(tmp_path, monkeypatch, prepared_on: str = "cpu") -> list[str]:
    """A CPU run given a worker prepared ahead (marked as prepared on `prepared_on`): it
    passes, and the ops the run itself sent are returned."""
    solution = tmp_path / "axpy.py"
    solution.write_text(SOLUTION)
    sent = _requests(monkeypatch)
    started = StartedWorker(gpu=False, prepare_on="cpu")
    started.wait_prepared()
    assert started.prepared_on == "cpu"
    started.prepared_on = prepared_on
    record = evaluate(
        load_problem(AXPY), load_solution(solution), RunOptions(device="cpu", mode="test"), worker=started
    )
    assert record.status == "PASSED", record.reason
    return sent


@pytest.mark.harness
def test_a_worker_prepared_ahead_is_not_prepared_again(tmp_path, monkeypatch) -> None:
    sent = _judged_with_a_prepared_worker(tmp_path, monkeypatch)
    assert "prepare" not in sent and sent[0] == "build"


@pytest.mark.harness
def test_a_worker_prepared_for_another_device_is_prepared_for_this_one(tmp_path, monkeypatch) -> None:
    sent = _judged_with_a_prepared_worker(tmp_path, monkeypatch, prepared_on="cuda:3")  # as if made on another GPU
    assert sent[0] == "prepare"


@pytest.mark.harness
def test_preparing_ahead_waits_for_the_gpu_lock(tmp_path) -> None:
    lock = threading.Lock()
    lock.acquire()  # a job is timing
    started = StartedWorker(gpu=False, prepare_on="cpu", gpu_lock=lock)
    try:
        time.sleep(3)  # long enough for its imports on a slow machine's second try
        assert started.prepared_on is None
        lock.release()
        started.wait_prepared()
        assert started.prepared_on == "cpu"
    finally:
        started.close()
    assert not lock.locked()


@pytest.mark.harness
def test_closing_a_worker_while_it_prepares_does_not_hang() -> None:
    lock = threading.Lock()
    lock.acquire()
    started = StartedWorker(gpu=False, prepare_on="cpu", gpu_lock=lock)
    begun = time.monotonic()
    started.close()
    assert started.prepared_on is None and not started.alive()
    assert time.monotonic() - begun < 30


def test_a_teardown_never_runs_while_a_job_times() -> None:
    warm = Warm()
    events: list[str] = []
    with warm.quiet():
        warm.retire(lambda: events.append("teardown"))
        time.sleep(0.3)
        events.append("timed")
    warm.close()
    assert events == ["timed", "teardown"]


def test_a_kept_sampler_whose_process_died_is_not_handed_out() -> None:
    class Dead:
        closed = False

        def __init__(self) -> None:
            self.process = subprocess.Popen([sys.executable, "-c", "pass"])
            self.process.wait()

        def close(self) -> None:
            self.closed = True

    warm = Warm()
    dead = Dead()
    warm.sampler = dead
    assert warm.take_sampler() is None and dead.closed and warm.sampler is None


@pytest.mark.harness
def test_jobs_through_a_warm_evaluator_leave_no_worker_behind(tmp_path) -> None:
    """Workers retired in the background are all gone once the warm state is closed."""
    solution = tmp_path / "axpy.py"
    solution.write_text(SOLUTION)
    warm = Warm()
    workers = []
    for _ in range(2):
        started = StartedWorker(gpu=False, prepare_on="cpu", gpu_lock=warm.gpu)
        workers.append(started)
        record = evaluate(
            load_problem(AXPY),
            load_solution(solution),
            RunOptions(device="cpu", mode="test"),
            worker=started,
            warm=warm,
        )
        assert record.status == "PASSED", record.reason
    warm.close()
    assert all(not w.alive() and not Path(w._folder.name).exists() for w in workers)


WARMED = """import sys

import torch
from triton.runtime.cache import triton_key

# built only where the worker computed Triton's cache key before the solution was imported
assert triton_key.cache_info().currsize == 1, "Triton's cache key was not computed ahead"
# and began its driver utilities' compile beside it (which fails without a GPU), over by now
ahead = sys.modules["gpuarena.harness.inside.triton_key"]
assert ahead._utils is not None and not ahead._utils.is_alive(), "Triton's utilities were not made ahead"


def solve(a, x, b, y):
    torch.addcmul(b, a, x, out=y)
"""


@pytest.mark.harness
def test_a_worker_started_ahead_on_a_gpu_computes_triton_s_key_before_the_build(tmp_path, monkeypatch) -> None:
    """A Triton kernel's first launch hashes Triton's 500 MB library for its cache key; a worker
    started ahead on a GPU computes it in a thread from its first moment (harness/inside/triton_key.py),
    over before the solution is imported. Not on the CPU (the interpreter needs no key); asked
    for here, the worker does it on the CPU too."""
    from gpuarena.harness.launch import started as started_module

    assert started_module.warm_triton("cuda:0") is True  # Triton is installed here
    assert started_module.warm_triton("cpu") is False and started_module.warm_triton(None) is False
    solution = tmp_path / "warmed.py"
    solution.write_text(WARMED)
    options = RunOptions(device="cpu", mode="test")

    cold = StartedWorker(gpu=False, prepare_on="cpu")
    cold.wait_prepared()
    record = evaluate(load_problem(AXPY), load_solution(solution), options, worker=cold)
    assert record.status == "COMPILE_ERROR" and "not computed ahead" in record.reason + record.log

    monkeypatch.setattr(started_module, "warm_triton", lambda prepare_on: True)
    warm = StartedWorker(gpu=False, prepare_on="cpu")
    warm.wait_prepared()
    record = evaluate(load_problem(AXPY), load_solution(solution), options, worker=warm)
    assert record.status == "PASSED", record.reason + record.log[-2000:]


def test_workers_coming_and_going_share_the_gpu_and_timing_holds_it_alone() -> None:
    lock = GpuLock()
    assert lock.acquire(timeout=1) and lock.acquire(timeout=1)  # a worker prepared while another is torn down
    with lock.alone(0.2) as taken:
        assert not taken  # not while either holds it
    lock.release()
    lock.release()
    assert not lock.locked()
    with lock.alone(1) as taken:
        assert taken and lock.locked()
        assert not lock.acquire(timeout=0.2)  # no worker comes or goes while a job times
    assert lock.acquire(timeout=1)
    lock.release()


def test_a_job_waiting_to_time_goes_before_workers_that_come_later() -> None:
    lock = GpuLock()
    assert lock.acquire(timeout=1)  # a worker being prepared
    order: list[str] = []

    def time_a_job() -> None:
        with lock.alone(5) as taken:
            order.append(f"timed {taken}")

    job = threading.Thread(target=time_a_job)
    job.start()
    time.sleep(0.2)  # the job is waiting now
    assert not lock.acquire(timeout=0.2)  # a later worker waits behind it
    lock.release()
    job.join()
    assert order == ["timed True"]
    assert lock.acquire(timeout=1)
    lock.release()
