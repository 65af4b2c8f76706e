"""One test per verdict: each failure gets its own status, a reason and the log."""

from __future__ import annotations

import time

import psutil
import pytest

from conftest import EXAMPLES, SOLUTIONS, judge


@pytest.mark.harness
def test_passing_solution(softmax_small):
    record = softmax_small(EXAMPLES / "softmax" / "pytorch.py")
    assert record.status == "PASSED", record.reason
    assert record.workloads[0].trials == 3
    assert record.workloads[0].max_abs_error < 1e-5


@pytest.mark.harness
def test_compile_error_shows_the_syntax_error(softmax_small):
    record = softmax_small(SOLUTIONS / "syntax_error.py")
    assert record.status == "COMPILE_ERROR"
    assert "SyntaxError" in record.reason


@pytest.mark.harness
def test_wrong_signature_is_a_compile_error_naming_the_inputs(softmax_small):
    record = softmax_small(SOLUTIONS / "bad_signature.py")
    assert record.status == "COMPILE_ERROR"
    assert "solve(x)" in record.reason


@pytest.mark.harness
def test_exception_is_a_runtime_error_with_traceback(softmax_small):
    record = softmax_small(SOLUTIONS / "raises.py")
    assert record.status == "RUNTIME_ERROR"
    assert "boom" in record.reason
    assert "Traceback" in record.log and "raises.py" in record.log


@pytest.mark.harness
def test_segfault_is_a_runtime_error_naming_the_signal(softmax_small):
    record = softmax_small(SOLUTIONS / "segfault.py")
    assert record.status == "RUNTIME_ERROR"
    assert "SIGSEGV" in record.reason


@pytest.mark.harness
def test_exit_with_status_zero_is_not_a_pass(softmax_small):
    record = softmax_small(SOLUTIONS / "exit_zero.py")
    assert record.status == "RUNTIME_ERROR"
    assert "exited with status 0" in record.reason
    assert '"status": "PASSED"' in record.log  # what it printed is kept, never parsed


@pytest.mark.harness
def test_what_compiled_code_printed_reaches_the_log(softmax_small, tmp_path):
    """What compiled code prints through C stdio is kept, although the worker leaves with _exit."""
    solution = tmp_path / "prints_from_c.py"
    solution.write_text(
        'import ctypes\nimport torch\n\nctypes.CDLL(None).printf(b"printed-by-c-stdio\\n")\n\n\n'
        "def solve(x):\n    return torch.softmax(x, dim=-1)\n"
    )
    record = softmax_small(solution)
    assert record.status == "PASSED", record.reason
    assert "printed-by-c-stdio" in record.log


@pytest.mark.harness
def test_timeout_kills_the_worker_and_leaves_nothing_behind(softmax_small):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    record = softmax_small(SOLUTIONS / "sleeps.py", timeout_s=6.0)
    assert record.status == "TIMEOUT"
    # the limit starts once the worker has started (its start-up is ours, and slow on a busy machine)
    assert record.duration_s - record.phases["start-up"] < 30
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before
    # where the worker was when it stopped answering: its stack, down to the solution's line
    assert "sleeps.py" in record.log and "in solve" in record.log, record.log[-2000:]


@pytest.mark.harness
def test_a_slow_start_up_is_not_the_solutions_time(softmax_small, monkeypatch):
    """The time limit starts once the worker has started: a busy machine's slow start-up (here
    5 s more than usual) never times out an honest run under a 4 s limit."""
    from gpuarena.harness.launch.started import StartedWorker

    usual = StartedWorker.wait_prepared

    def slow(self: StartedWorker) -> None:
        time.sleep(5)
        usual(self)

    monkeypatch.setattr(StartedWorker, "wait_prepared", slow)
    record = softmax_small(EXAMPLES / "softmax" / "pytorch.py", timeout_s=4.0)
    assert record.status == "PASSED", record.reason
    assert record.phases["start-up"] >= 5


@pytest.mark.parametrize(
    "fixture, status, words",
    [
        ("wrong_shape.py", "WRONG_SHAPE", "shape [64, 999], expected [64, 1000]"),
        ("wrong_dtype.py", "WRONG_DTYPE", "torch.float64"),
        ("returns_nan.py", "WRONG_VALUES", "NaN"),
        ("mutates_input.py", "REJECTED", "modified its input x"),
        ("aliases_input.py", "REJECTED", "aliases input x"),
        ("tensor_subclass.py", "REJECTED", "not exactly a torch.Tensor"),
        ("leaves_thread.py", "REJECTED", "thread"),
        ("prints_fake_result.py", "WRONG_VALUES", "output y"),
    ],
)
@pytest.mark.harness
def test_failure_statuses(softmax_small, fixture, status, words):
    record = softmax_small(SOLUTIONS / fixture)
    assert record.status == status, record.reason
    assert words in record.reason
    assert record.score is None


@pytest.mark.harness
def test_wrong_values_reports_where_and_how_much(softmax_small):
    record = softmax_small(EXAMPLES / "softmax" / "broken.py")
    assert record.status == "WRONG_VALUES"
    assert "elements outside" in record.reason and "worst at" in record.reason
    assert record.workloads[0].max_abs_error > 1e-3


@pytest.mark.harness
def test_later_workloads_are_skipped_after_a_failure():
    record = judge("level1/softmax", EXAMPLES / "softmax" / "broken.py")
    assert record.workloads[0].status == "WRONG_VALUES"
    assert all(w.status == "SKIPPED" for w in record.workloads[1:])
    assert len(record.workloads) >= 2


@pytest.mark.harness
def test_destination_passing_convention():
    assert judge("axpy_dest", SOLUTIONS / "dest_good.py").status == "PASSED"
    record = judge("axpy_dest", SOLUTIONS / "dest_skips_write.py")
    assert record.status == "WRONG_VALUES"  # outputs were poisoned before the call
    assert "NaN" in record.reason


@pytest.mark.harness
def test_cuda_solution_on_the_cpu_is_refused_clearly(softmax_small):
    record = softmax_small(EXAMPLES / "softmax" / "cuda")
    assert record.status == "COMPILE_ERROR"
    assert "--device cuda" in record.reason


@pytest.mark.harness
def test_a_patched_clock_cannot_claim_zero_time(softmax_small):
    record = softmax_small(SOLUTIONS / "patches_timer.py", mode="benchmark")
    assert record.status == "REJECTED"
    assert "no measurable work" in record.reason


@pytest.fixture
def worker_writable_tmp():
    """A folder the worker can write to even as a user of its own (pytest's tmp_path is the
    supervisor's alone): sticky and world-writable, like /tmp."""
    import os
    import shutil
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp(prefix="gpuarena-test-"))
    os.chmod(folder, 0o1777)
    # the worker's sandbox shows it nothing of the host's file system unless shared
    previous = os.environ.get("GPUARENA_SANDBOX_SHARE")
    os.environ["GPUARENA_SANDBOX_SHARE"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("GPUARENA_SANDBOX_SHARE", None)
    else:
        os.environ["GPUARENA_SANDBOX_SHARE"] = previous
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.harness
def test_processes_left_running_are_rejected_and_killed(softmax_small):
    from gpuarena.harness.proctree import children_of

    record = softmax_small(SOLUTIONS / "spawns_daemon.py")
    assert record.status == "REJECTED"
    assert "process(es)" in record.reason
    sleepers = [p for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] == ["sleep", "1000"]]
    assert not sleepers
    assert not children_of(psutil.Process().pid) - {c.pid for c in psutil.Process().children()}


@pytest.mark.harness
def test_double_forked_orphans_are_rejected_and_reaped(softmax_small):
    # children this test process had before (another test's service may keep its standings
    # process, service/standings_process.py) are not the run's
    before = {c.pid for c in psutil.Process().children()}
    record = softmax_small(SOLUTIONS / "double_fork.py")
    # the worker is a subreaper: the orphaned grandchild comes back to it, and a process
    # left behind at import is rejected; it must not outlive the run either
    assert record.status == "REJECTED", record.reason
    assert "process(es)" in record.reason
    time.sleep(0.2)
    leftovers = [
        p
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["status"] != psutil.STATUS_ZOMBIE
        and "double_fork" not in " ".join(p.info["cmdline"] or [])
        and p.ppid() == psutil.Process().pid
        and p.pid not in before
    ]
    assert not leftovers


@pytest.mark.harness
def test_worker_has_no_network_where_the_platform_allows_it(softmax_small, worker_writable_tmp, monkeypatch):
    import os

    tmp_path = worker_writable_tmp
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    record = softmax_small(SOLUTIONS / "network.py")
    assert record.status == "PASSED"
    seen = (tmp_path / "gpuarena-network-report.txt").read_text()
    if os.geteuid() == 0:  # unprivileged users may not create network namespaces
        assert record.environment.worker_network == "isolated"
    if record.environment.worker_network == "isolated":
        assert seen == "errno 101"  # ENETUNREACH: not even loopback is up


@pytest.mark.harness
def test_memory_hog_hits_the_workers_cap(softmax_small):
    record = softmax_small(SOLUTIONS / "hogs_memory.py", memory_limit_bytes=2 << 30)
    assert record.status == "RUNTIME_ERROR"
    assert "MemoryError" in record.reason


RIGHT_ONCE = """import torch

calls = [0]


def solve(x):
    calls[0] += 1
    out = torch.softmax(x, dim=-1)
    return out if calls[0] == 1 else out * 0.5
"""


@pytest.mark.harness
def test_a_timed_workload_gets_one_trial_and_its_timed_rounds_check_the_rest(softmax_small, tmp_path):
    """A workload timed next gets one correctness trial (correctness.TIMED_TRIALS): each timed
    round checks a call on fresh inputs, chosen after the block ran, which is what the second and
    third trials checked. A solution right only on its first call still fails, in the rounds."""
    record = softmax_small(EXAMPLES / "softmax" / "pytorch.py", mode="benchmark")
    assert record.status == "PASSED", record.reason
    assert record.workloads[0].trials == 1 and record.workloads[0].time is not None
    once = tmp_path / "right_once.py"
    once.write_text(RIGHT_ONCE)
    record = softmax_small(once, mode="benchmark")
    assert record.status == "WRONG_VALUES" and "a timed call returned wrong values" in record.reason, record.reason
    record = softmax_small(once)  # test mode: nothing timed, three trials
    assert record.status == "WRONG_VALUES" and "trial 2" in record.reason, record.reason
