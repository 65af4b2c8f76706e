"""The CPU-time bound's allowance for what the worker's process costs, measured before the
solution is built (harness/calibration.py), in real runs with real worker processes."""

from __future__ import annotations

import pytest

from conftest import SOLUTIONS, judge
from gpuarena.contracts import messages
from gpuarena.harness import calibration
from gpuarena.harness.inside.worker import HANDLERS, Worker
from gpuarena.harness.launch import process


@pytest.mark.harness
def test_the_worker_s_extra_is_measured_before_the_solution_is_built(monkeypatch):
    """Every calibration request comes before `build`, and the extra it finds is the worker's
    process at work (its socket, its sandbox): more than nothing per request, and it is what
    the bound then allows."""
    ops: list[str] = []
    found: list[calibration.ProcessExtra | None] = []
    request, calibrate = process.WorkerProcess.request, calibration.calibrate

    def spy(self, message, *args, **kwargs):
        ops.append(message.op)
        return request(self, message, *args, **kwargs)

    def noted(*args, **kwargs):
        found.append(calibrate(*args, **kwargs))
        return found[-1]

    monkeypatch.setattr(process.WorkerProcess, "request", spy)
    monkeypatch.setattr("gpuarena.harness.supervisor.calibrate", noted)
    record = judge("axpy_dest", SOLUTIONS / "dest_good.py", mode="benchmark")
    assert record.status == "PASSED", record.reason
    asked = [i for i, op in enumerate(ops) if op == "calibrate"]
    assert len(asked) == calibration.ROUNDS * len(calibration.SIZES)
    assert max(asked) < ops.index("build")
    assert len(found) == 1 and found[0] is not None
    assert found[0].per_request_ns > 0 and found[0].per_call_ns >= 0


def test_a_worker_with_a_solution_loaded_refuses_to_calibrate():
    """From the build on, a harness-only block would be the solution's to shape (burn CPU in it,
    and the allowance grows): the worker says no, and the supervisor never asks."""
    worker = Worker(None)  # in-process: no connection needed
    worker.solve = lambda *args: None
    setup = messages.RunSetup(device="cpu", input_names=["x"], output_names=["y"])
    reply = HANDLERS[messages.Calibrate](worker, messages.Calibrate(n=1, setup=setup))
    assert reply == messages.Failure(status="RUNTIME_ERROR", reason="a solution is loaded")


def test_a_harness_only_block_runs_the_worker_s_own_time_code():
    """The stand-in block goes through Worker.time (checks, copies, the loop) in both conventions,
    and leaves the worker as it found it. Processes already there (here: one of this test's; in a
    worker, a language runtime's) are the harness's, not the block's."""
    import subprocess
    import sys

    already = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        _harness_only_blocks()
    finally:
        already.kill()
        already.wait()


def _harness_only_blocks() -> None:
    for convention, output_names in (("return", ["y"]), ("destination", ["y", "z"])):
        worker = Worker(None)
        setup = messages.RunSetup(
            device="cpu", convention=convention, input_names=["a", "b"], output_names=output_names
        )
        reply = HANDLERS[messages.Calibrate](worker, messages.Calibrate(n=3, setup=setup))
        assert isinstance(reply, messages.Timed) and reply.op == "calibrate"
        assert reply.e2e_ns is not None and len(reply.e2e_ns) == 3 and all(v > 0 for v in reply.e2e_ns)
        assert worker.solve is None and worker.sets == [] and worker.dests == []
