"""bench/multi_gpu.py's logic on the CPU: two fake devices (cpu:0, cpu:1), a phase with one
worker and one with two, and the record it writes (without the warm-up jobs, to keep it
short: `python bench/multi_gpu.py --fake-cpu --jobs 6` runs them)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.service.conftest import ROOT

pytestmark = pytest.mark.e2e


def test_multi_gpu_bench_runs_on_two_fake_devices(tmp_path) -> None:
    out = tmp_path / "multi-gpu.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "multi_gpu.py"),
            "--fake-cpu",
            "--jobs",
            "2",
            "--no-warmup",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(out.read_text())
    one, two = record["phases"]
    assert (one["devices"], two["devices"]) == (["cpu:0"], ["cpu:0", "cpu:1"])
    assert one["verdicts"] == two["verdicts"] == {"PASSED": 2} and record["all_passed"]
    assert set(one["jobs_per_device"]) == {"cpu:0"}
    assert set(two["jobs_per_device"]) <= {"cpu:0", "cpu:1"} and sum(two["jobs_per_device"].values()) == 2
    assert record["both_devices_used"] == (len(two["jobs_per_device"]) == 2)
    assert record["throughput_ratio"] == pytest.approx(two["jobs_per_min"] / one["jobs_per_min"], rel=1e-2)
    assert one["runner_exit"] == two["runner_exit"] == 0 and record["warmup"] is False


def _phase_record(devices: list[str], wall_s: float, jobs: int = 40, **over) -> dict:
    phase = {
        "devices": devices,
        "jobs": jobs,
        "wall_s": wall_s,
        "jobs_per_min": round(jobs / wall_s * 60, 2),
        "jobs_per_device": {d: jobs // len(devices) for d in devices},
        "verdicts": {"PASSED": jobs},
        "runner_exit": 0,
    }
    return {
        "date": "2026-11-22T00:00:00+00:00",
        "command": f"phase {len(devices)}",
        "kind": "H200",
        "devices": ["cuda:0", "cuda:1"],
        "problem": "axpy_dest",
        "mode": "benchmark",
        "jobs_per_phase": jobs,
        "phases": [phase],
    } | over


def test_combine_merges_phase_records_run_in_separate_calls(tmp_path) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import multi_gpu

    one, two = tmp_path / "one.json", tmp_path / "two.json"
    one.write_text(json.dumps(_phase_record(["cuda:0"], 300.0)))
    two.write_text(json.dumps(_phase_record(["cuda:0", "cuda:1"], 160.0)))
    record = multi_gpu.combine([one, two])
    assert record["throughput_ratio"] == pytest.approx(300 / 160, rel=1e-2)
    assert record["all_passed"] and record["both_devices_used"]
    assert record["command"] == ["phase 1", "phase 2"]

    two.write_text(json.dumps(_phase_record(["cuda:0", "cuda:1"], 160.0, jobs_per_phase=20)))
    with pytest.raises(SystemExit, match="differ"):
        multi_gpu.combine([one, two])
