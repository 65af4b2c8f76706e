"""Speed of light and the physical floor: a time under it is impossible and rejected."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES, judge
from gpuarena.harness.device.peaks import floor_seconds


def test_floor_is_the_larger_of_bytes_and_flops_terms():
    peaks = {"bandwidth_gbs": 1000.0, "tflops_bf16": 100.0, "tflops_fp32": 50.0}
    assert floor_seconds(peaks, 1e9, None) == 1e-3
    assert floor_seconds(peaks, 1e6, 1e12) == 1e-2
    assert floor_seconds(peaks, None, None) is None


@pytest.mark.harness
def test_run_below_the_floor_is_rejected():
    impossible = {"bandwidth_gbs": 1e-6, "tflops_bf16": 1e-9, "tflops_fp32": 1e-9}
    record = judge(
        "level1/softmax",
        EXAMPLES / "softmax" / "pytorch.py",
        mode="benchmark",
        workloads=["small-64x1000"],
        peaks=impossible,
    )
    assert record.status == "REJECTED"
    assert "below the physical floor" in record.reason


@pytest.mark.harness
def test_speed_of_light_is_reported_against_peaks():
    generous = {"bandwidth_gbs": 1e6, "tflops_bf16": 1e6, "tflops_fp32": 1e6}
    record = judge(
        "level1/softmax",
        EXAMPLES / "softmax" / "pytorch.py",
        mode="benchmark",
        workloads=["small-64x1000"],
        peaks=generous,
    )
    assert record.status == "PASSED", record.reason
    sol = record.workloads[0].speed_of_light
    assert sol.bytes == 2 * 64 * 1000 * 4 and sol.bandwidth_fraction < 1 and sol.floor_us > 0


@pytest.mark.harness
def test_a_cpu_time_below_what_its_cores_could_do_is_rejected(monkeypatch):
    """On the CPU no peaks are measured, but no core moves more than 2 TB/s or computes more
    than 4 TFLOP/s: a time under that (a patched clock ticking a nanosecond a call) is impossible,
    whatever the statistical CPU-time bound made of it."""
    from gpuarena.harness.device import peaks

    assert peaks.cpu_ceiling(2) == {"bandwidth_gbs": 4000.0, "tflops_bf16": 8.0, "tflops_fp32": 8.0}
    # the honest softmax (about 20 µs) is far above the real ceiling's floor (0.13 µs on 2 cores)
    assert floor_seconds(peaks.cpu_ceiling(2), 2 * 64 * 1000 * 4, 5 * 64 * 1000) < 2e-7
    monkeypatch.setattr(peaks, "CPU_CORE_CEILING", {"bandwidth_gbs": 1e-6, "tflops_bf16": 1e-9, "tflops_fp32": 1e-9})
    record = judge("level1/softmax", EXAMPLES / "softmax" / "pytorch.py", mode="benchmark", workloads=["small-64x1000"])
    assert record.status == "REJECTED" and "CPU core(s) could do at best" in record.reason, record.reason


def test_the_cpu_bound_allows_the_median_twin_block_not_the_latest():
    """One twin block's harness figure swings by half either way; judged against the latest, a
    forged clock on a small softmax passed CI twice (monkeypatch_timers). The median holds."""
    from gpuarena.harness.bounds import HARNESS_MARGIN, HARNESS_NS_PER_CALL, TimeBudget
    from gpuarena.harness.calibration import ProcessExtra

    budget = TimeBudget(cpu=True, cores=2, process_extra=ProcessExtra(per_request_ns=4_000, per_call_ns=0))
    for block in (600_000, 1_200_000, 640_000):  # 8 calls a block: 75, 150 (an outlier), 80 µs a call
        budget.add_harness(block)
    assert budget.harness_ns == 640_000
    assert budget.allowance_ns(8) == HARNESS_MARGIN * 640_000 + 4_000 + HARNESS_NS_PER_CALL * 8
    for _ in range(3):  # reported ~0, CPU time of the harness plus a 40 µs kernel a call
        budget.add([1] * 8, wall_ns=2_000_000, worker_cpu_ns=8 * (80_000 + 40_000))
    assert not budget.holds()


@pytest.mark.harness
def test_the_cpu_bound_holds_with_many_threads_beside_the_supervisor():
    """The twin measures the harness's share in the supervisor's process, which may hold many
    threads (a runner's, a test suite's). Enumerating them, and reading each one's children, made
    the share 199 µs a call against 75, and a timer forged to report 2-3 µs PASSED in CI. The twin
    now checks its own thread only, as a worker's checks cost."""
    import threading
    from pathlib import Path

    forged = Path(__file__).parents[1] / "redteam" / "exploits" / "monkeypatch_timers" / "timer_method_replaced.py"
    stop = threading.Event()
    idle = [threading.Thread(target=stop.wait, daemon=True) for _ in range(60)]
    for thread in idle:
        thread.start()
    try:
        record = judge("level1/softmax", forged, mode="benchmark", workloads=["small-64x1000"])
    finally:
        stop.set()
    assert record.status == "REJECTED" and "tampered" in record.reason, record.reason


@pytest.mark.harness
def test_the_harness_share_is_the_twin_s_cpu_time_outside_its_calls_not_outside_their_windows(tmp_path):
    """The reference's calls' windows are clock time; on a busy machine they also hold the
    supervisor's waits for a core. The twin took the block's CPU time less those windows as the
    harness's share, which such waits brought to 0, and an honest softmax beside two other
    judgings on 2 cores was REJECTED by the main thread's bound (CI, contest_rehearsal.sh). A
    reference that sleeps in its calls stands in for the waits: its windows hold time off the
    core, and the share must still be the harness's CPU time."""
    import shutil
    from pathlib import Path

    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import load_problem
    from gpuarena.solutions import load_solution

    folder = tmp_path / "softmax"
    shutil.copytree(Path(__file__).resolve().parents[1] / "problems" / "level1" / "softmax", folder)
    reference = folder / "reference.py"
    text = reference.read_text()
    waiting = text.replace(
        "    return torch.softmax(x.float(), dim=-1)",
        "    time.sleep(0.002)\n    return torch.softmax(x.float(), dim=-1)",
        1,
    )
    assert waiting != text
    reference.write_text("import time\n" + waiting)
    honest = tmp_path / "honest.py"
    honest.write_text("import torch\n\n\ndef solve(x):\n    return torch.softmax(x.float(), dim=-1).to(x.dtype)\n")
    options = RunOptions(device="cpu", mode="benchmark", timeout_s=180, workloads=["small-128x4096"], budget_s=0.5)
    record = evaluate(load_problem(folder), load_solution(honest), options)
    assert record.status == "PASSED", record.reason
