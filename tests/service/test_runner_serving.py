"""A runner's serving job process (issue 47: "the warm path (run-stdin, run-many, runners) keeps
workers and references ready across requests"): kernel jobs go one after another to one job
process that judges them with the harness's Evaluator, each with a worker of its own; one that
dies is replaced and the next job is judged all the same, even one handed to it as it died. A real runner, its real job processes
and a real server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from tests.service.conftest import submission_body

from gpuarena.client import Client
from gpuarena.contracts.wire import DeviceSlot
from gpuarena.runner.agent import Runner, RunnerConfig, Spare

pytestmark = pytest.mark.e2e


def _judged(api, headers, thread: threading.Thread) -> dict:
    made = api.http.post("/api/submissions", json=submission_body(mode="benchmark"), headers=headers)
    assert made.status_code == 201, made.text
    deadline = time.monotonic() + 300
    while not (shown := api.http.get(f"/api/submissions/{made.json()['id']}", headers=headers).json())["done"]:
        assert time.monotonic() < deadline and thread.is_alive(), f"not done: {shown['status']}"
        time.sleep(0.2)
    return shown


def _serving_pid(runner: Runner) -> int:
    with runner.lock:
        spare = runner.spares["cpu:0"]
    assert spare.serving and spare.process.poll() is None, "no serving job process waits for the next job"
    return spare.process.pid


def test_kernel_jobs_are_served_by_one_job_process_and_a_dead_one_is_replaced(api, live, tmp_path) -> None:
    token = api.user("box-account", "runner")["Authorization"].split()[1]
    config = RunnerConfig(
        name="box",
        slots=[DeviceSlot(device="cpu:0", kind="cpu")],
        work_dir=tmp_path / "runner",
        health_interval_s=0,
        serve=True,
        budget_s=0.1,
    )
    runner = Runner(Client(live, token), config)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    alice = api.user("alice")
    try:
        deadline = time.monotonic() + 60
        while not api.http.get("/api/device-kinds").json():
            assert time.monotonic() < deadline and thread.is_alive(), "the runner did not say hello"
            time.sleep(0.2)
        first = _judged(api, alice, thread)
        served_by = _serving_pid(runner)
        second = _judged(api, alice, thread)
        assert _serving_pid(runner) == served_by  # the same process judged the second job
        os.kill(served_by, signal.SIGKILL)  # dies waiting: the next job gets a fresh one
        third = _judged(api, alice, thread)
        replaced_by = _serving_pid(runner)
        # one that dies as the job comes (it reads the job, then is killed): a fresh one judges it
        dying = subprocess.Popen(
            [sys.executable, "-c", "import os, sys; sys.stdin.readline(); os.kill(os.getpid(), 9)"],
            stdin=subprocess.PIPE,
        )
        with runner.lock:
            kept = runner.spares.pop("cpu:0")
            runner.spares["cpu:0"] = Spare(dying, tmp_path / "dying.log", serving=True, jobs=1)
        kept.process.kill()
        fourth = _judged(api, alice, thread)
        assert dying.wait(timeout=10) == -signal.SIGKILL
    finally:
        runner.stop()
        thread.join(timeout=60)
    for n, shown in enumerate((first, second, third, fourth)):
        assert shown["status"] == "PASSED", (n, shown["reason"])
        assert shown["evaluation"]["workloads"] and all(w["time"] for w in shown["evaluation"]["workloads"])
    assert replaced_by != served_by
    assert len({s["evaluation"]["started_at"] for s in (first, second, third)}) == 3  # three runs, none reused
