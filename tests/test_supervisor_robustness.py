"""The supervisor always gives a verdict: whatever the worker sends (fuzzed frames), whatever
the outputs are (integers, booleans, 0-dim), and whatever it made of its log."""

from __future__ import annotations

import json
import random

import pytest

from conftest import FIXTURES
from gpuarena.contracts import messages
from gpuarena.harness import protocol
from gpuarena.harness.failure import RunFailure, worker_failure
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem
from gpuarena.solutions import load_solution

EXACT_OUTPUTS = FIXTURES / "exact_outputs" / "argmax_sign_total"
"""A problem whose outputs are an int64 index, a bool and a 0-dim float (its own folder: the
service's tests list every problem under fixtures/problems)."""


def _frames(rng: random.Random) -> bytes:
    """One malicious or broken frame."""
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    if kind == 1:
        depth = rng.choice([50, 1000, 100_000])
        return b'{"op": "time", "x": ' + b"[" * depth + b"]" * depth + b"}"
    if kind == 2:
        return b'{"op": "time", "device_ns": [' + b"9" * rng.choice([30, 5000, 100_000]) + b"]}"
    if kind == 3:
        return json.dumps(rng.choice([[], 1, "x", None, 1.5, True])).encode()
    if kind == 4:
        return json.dumps(
            {
                "op": "failure",
                "status": rng.choice(["PASSED", "SKIPPED", "", 7, None, "WHATEVER"]),
                "reason": rng.choice(["x", 3, None, ["a"]]),
            }
        ).encode()
    if kind == 5:
        return b'{"op": "time", "device_ns": [NaN, Infinity, -Infinity]}'
    if kind == 6:
        return json.dumps({"op": "time", "device_ns": "x" * rng.randrange(10, 10_000)}).encode()
    if kind == 7:
        return b'{"op": ' + b'"' + b"\xff\xfe" * 10 + b'"}'
    return json.dumps(
        {"op": rng.choice(["time", "call", "build", "failure"]), "nonce": rng.choice([None, 1, "0" * 16])}
    ).encode()


def test_no_frame_makes_the_parser_raise():
    rng = random.Random(20261123)
    for _ in range(400):
        reply = protocol.parse_reply(_frames(rng))
        assert isinstance(reply, dict)
        if reply.get("op") == "garbage":
            assert reply["why"]


def test_failure_replies_carry_only_a_worker_s_statuses():
    assert worker_failure(messages.Failure(status="RUNTIME_ERROR", reason="boom")).status == "RUNTIME_ERROR"
    for status in ("PASSED", "SKIPPED", "OK", "", "WRONG_VALUES"):
        failure = worker_failure(messages.Failure(status=status))
        assert isinstance(failure, RunFailure) and failure.status == "REJECTED", status
    for forged in ({"status": 3}, {"status": "COMPILE_ERROR", "reason": ["not", "a", "string"]}, {}):
        with pytest.raises(messages.NotAReply):
            messages.read_reply({"op": "failure", **forged}, messages.Call(index=0))


def test_the_log_is_read_within_its_limit_whatever_its_size(tmp_path):
    log = tmp_path / "worker.log"
    with open(log, "wb") as f:
        f.seek(1 << 40)  # a sparse terabyte
        f.write(b"the end\n")
    process = WorkerProcess.__new__(WorkerProcess)
    process.log_path = log
    text = process.read_log(limit=1000)
    assert text.startswith("[... earlier output cut ...]") and text.endswith("the end\n")
    assert len(text) < 1100


HONEST = """
import torch

def solve(x):
    return torch.argmax(x, dim=-1), x.sum(dim=-1) > 0, x.sum()
"""

WRONG_INDEX = """
import torch

def solve(x):
    index = torch.argmax(x, dim=-1)
    index[5] = (index[5] + 1) % x.shape[-1]
    return index, x.sum(dim=-1) > 0, x.sum()
"""

WRONG_BOOL = """
import torch

def solve(x):
    positive = x.sum(dim=-1) > 0
    return torch.argmax(x, dim=-1), ~positive, x.sum()
"""

WRONG_TOTAL = """
import torch

def solve(x):
    return torch.argmax(x, dim=-1), x.sum(dim=-1) > 0, x.sum() + 1.0
"""


@pytest.mark.parametrize(
    "source, status, words",
    [
        (HONEST, "PASSED", ""),
        (WRONG_INDEX, "WRONG_VALUES", "output index: 1 of 64 elements differ (integer output, compared exactly)"),
        (WRONG_BOOL, "WRONG_VALUES", "output positive: 64 of 64 elements differ"),
        (WRONG_TOTAL, "WRONG_VALUES", "output total"),
    ],
    ids=["honest", "wrong-int", "wrong-bool", "wrong-0dim"],
)
@pytest.mark.harness
def test_integer_boolean_and_0_dim_outputs_get_a_verdict(tmp_path, source, status, words):
    solution = tmp_path / "solution.py"
    solution.write_text(source)
    problem = load_problem(EXACT_OUTPUTS)
    record = evaluate(problem, load_solution(solution), RunOptions(mode="benchmark", budget_s=0.2, timeout_s=60))
    assert record.status == status, record.reason
    assert words in record.reason


def test_check_handles_integer_boolean_and_0_dim_outputs():
    report = check_problem(EXACT_OUTPUTS)
    assert report.ok, report


@pytest.mark.harness
def test_times_that_cannot_be_bounded_on_the_cpu_are_no_pass(monkeypatch, tmp_path):
    """Where the worker's CPU time cannot be read from outside, its reported times are its word
    alone: the run is REJECTED with the reason, never PASSED on them."""
    monkeypatch.setattr(WorkerProcess, "cpu_ns", lambda self: None)
    honest = tmp_path / "axpy.py"
    honest.write_text("import torch\n\n\ndef solve(a, x, b, y):\n    torch.addcmul(b, a, x, out=y)\n")
    record = evaluate(
        load_problem(FIXTURES / "problems" / "axpy_dest"),
        load_solution(honest),
        RunOptions(device="cpu", mode="benchmark", budget_s=0.2, workloads=["n4096"]),
    )
    assert record.status == "REJECTED", record.reason
    assert "CPU time could not be read from outside" in record.reason


@pytest.mark.harness
def test_a_worker_that_shrinks_its_shared_input_gets_a_record_not_a_dead_supervisor(tmp_path):
    """Without a sandbox the worker could open the arena's files by name and truncate the one
    behind its input: the supervisor's next read of it died with SIGBUS, and no record came
    back. The shared memory is now a sealed memfd: the run is judged as any other. Run in a
    process of its own, so that a regression fails this test instead of killing the suite."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    case = Path(__file__).parents[1] / "redteam/exploits/crashing_the_supervisor/truncates_the_shared_inputs.py"
    script = (
        "from gpuarena.harness.judge import RunOptions, evaluate\n"
        "from gpuarena.problems import resolve_problem\n"
        "from gpuarena.solutions import load_solution\n"
        f"record = evaluate(resolve_problem('level1/softmax'), load_solution({str(case)!r}), "
        "RunOptions(device='cpu', mode='test', workloads=['small-64x1000']))\n"
        "print(record.status.value)\n"
    )
    env = {**os.environ, "GPUARENA_SANDBOX": "0", "GPUARENA_WORKER_ISOLATION": "0", "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "WRONG_VALUES"


@pytest.mark.harness
def test_an_exception_in_the_supervisor_is_an_error_record_with_its_reason(monkeypatch, tmp_path):
    """Whatever breaks in the supervisor outside the judging (here the shared memory's teardown)
    gives an ERROR record that says what broke, never a crash without a record."""
    from gpuarena.harness.transport import SharedArena

    def broken_close(self):
        raise RuntimeError("the arena would not close")

    monkeypatch.setattr(SharedArena, "close", broken_close)
    honest = tmp_path / "axpy.py"
    honest.write_text("import torch\n\n\ndef solve(a, x, b, y):\n    torch.addcmul(b, a, x, out=y)\n")
    record = evaluate(
        load_problem(FIXTURES / "problems" / "axpy_dest"),
        load_solution(honest),
        RunOptions(device="cpu", mode="test", workloads=["n4096"]),
    )
    assert record.status == "ERROR"
    assert record.reason == "the harness failed: RuntimeError: the arena would not close"
    assert "Traceback" in record.log
