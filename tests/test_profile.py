"""Profile mode on the CPU: ncu's raw CSV page read, the roofline drawn, and the whole run
(sandboxed child, its outputs checked, the report kept) with a stand-in for ncu that runs its
target and writes a report of our own making. The real ncu runs on the GPU machine
(tests/gpu/test_gpu.py::test_profile_mode_on_the_triton_example)."""

from __future__ import annotations

import json
import os
import stat
import xml.dom.minidom
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import EXAMPLES
from gpuarena.cli.app import app
from gpuarena.contracts.profile_record import ProfileRecord, ProfileSide
from gpuarena.harness.profile import ncu_report, roofline
from gpuarena.harness.profile.run import pick_workload, run_profile
from gpuarena.problems import resolve_problem
from gpuarena.solutions import load_solution

HEADER = [
    "ID",
    "Process ID",
    "Process Name",
    "Host Name",
    "Kernel Name",
    "Context",
    "Stream",
    "Block Size",
    "Grid Size",
    "Device",
    "CC",
    ncu_report.DURATION,
    ncu_report.SM_THROUGHPUT,
    ncu_report.MEMORY_THROUGHPUT,
    ncu_report.OCCUPANCY,
    ncu_report.REGISTERS,
    ncu_report.SHARED_STATIC,
    ncu_report.SHARED_DYNAMIC,
    ncu_report.DRAM_BYTES,
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio",
]
UNITS = [
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "nsecond",
    "%",
    "%",
    "%",
    "register/thread",
    "byte/block",
    "byte/block",
    "byte",
    "inst",
    "inst",
    "",
    "",
    "",
    "",
]
ROWS = [
    [
        "0",
        "4242",
        "python3",
        "127.0.0.1",
        "softmax_kernel",
        "1",
        "7",
        "(128, 1, 1)",
        "(64, 1, 1)",
        "0",
        "9.0",
        "4,480",
        "12.5",
        "38.25",
        "22.1",
        "32",
        "0",
        "1024",
        "512,000",
        "64000",
        "128000",
        "3.5",
        "0.8",
        "1.2",
        "0.4",
    ],
    [
        "1",
        "4242",
        "python3",
        "127.0.0.1",
        "void at::native::copy_kernel",
        "1",
        "7",
        "(256, 1, 1)",
        "(10, 1, 1)",
        "0",
        "9.0",
        "1,020",
        "2",
        "5",
        "n/a",
        "16",
        "0",
        "0",
        "0",
        "0",
        "0",
        "",
        "",
        "",
        "",
    ],
]


def raw_csv(rows: list[list[str]] = ROWS) -> str:
    quoted = [",".join(f'"{cell}"' for cell in row) for row in [HEADER, UNITS, *rows]]
    return "==PROF== Connected to process 4242\n" + "\n".join(quoted) + "\n"


def test_the_raw_page_gives_each_kernel_with_its_figures():
    first, second = ncu_report.parse_raw_csv(raw_csv())
    assert first.name == "softmax_kernel" and first.grid == "(64, 1, 1)" and first.block == "(128, 1, 1)"
    assert first.duration_us == pytest.approx(4.48)  # ns to µs, with ncu's thousands separator
    assert (first.compute_throughput_pct, first.memory_throughput_pct, first.achieved_occupancy_pct) == (
        12.5,
        38.25,
        22.1,
    )
    assert first.registers_per_thread == 32 and first.shared_memory_per_block_bytes == 1024
    assert first.dram_bytes == 512_000 and first.flops == 2 * 64000 + 128000
    assert [s.reason for s in first.stalls] == ["long_scoreboard", "math_pipe_throttle", "barrier"]
    assert first.arithmetic_intensity == pytest.approx(256000 / 512000)
    assert first.achieved_flops == pytest.approx(256000 / 4.48e-6)
    assert second.achieved_occupancy_pct is None and second.stalls == [] and second.arithmetic_intensity is None


def test_other_units_are_scaled_and_a_table_without_kernels_is_refused():
    units = list(UNITS)
    units[HEADER.index(ncu_report.DURATION)] = "usecond"
    units[HEADER.index(ncu_report.DRAM_BYTES)] = "Mbyte"
    text = "\n".join(",".join(f'"{c}"' for c in row) for row in [HEADER, units, ROWS[0]])
    (kernel,) = ncu_report.parse_raw_csv(text)
    assert kernel.duration_us == pytest.approx(4480) and kernel.dram_bytes == pytest.approx(512e9)
    with pytest.raises(ncu_report.NcuError, match="no CSV rows"):
        ncu_report.parse_raw_csv("==ERROR== the report could not be opened\n")
    with pytest.raises(ncu_report.NcuError, match="Kernel Name"):
        ncu_report.parse_raw_csv('"a","b"\n"1","2"\n')


def test_the_roofline_is_one_valid_svg_with_a_point_per_kernel():
    kernels = ncu_report.parse_raw_csv(raw_csv())
    record = ProfileRecord(
        problem="level1/softmax",
        solution="s",
        workload="w",
        device="cuda",
        status="PASSED",
        solution_profile=ProfileSide(kernels=kernels),
        reference_profile=ProfileSide(kernels=kernels[:1]),
        peaks={"bandwidth_gbs": 3000.0, "tflops_fp32": 50.0, "tflops_bf16": 700.0},
    )
    drawn = roofline.for_record(record)
    xml.dom.minidom.parseString(drawn)  # well-formed
    assert drawn.count("<circle") == 2 + 2  # two kernels with a point (the copy has no FLOPs), two legend dots
    assert "FP32 50.0 TFLOP/s" in drawn and "3000 GB/s" in drawn
    empty = roofline.svg([], 3e12, {})
    xml.dom.minidom.parseString(empty)


FAKE_NCU = """#!/bin/sh
# a stand-in for ncu: runs its target, then writes the canned report beside the export name
here=$(dirname "$0")
if [ "$1" = "--version" ]; then echo "stand-in ncu"; exit 0; fi
if [ "$1" = "--import" ]; then cat "$2"; exit 0; fi
base=""
while [ $# -gt 0 ]; do
  case "$1" in
    --export) base=$2; shift 2 ;;
    --target-processes|--nvtx-include|--section|--metrics) shift 2 ;;
    --nvtx|--force-overwrite) shift ;;
    *) break ;;
  esac
done
"$@" || exit $?
cp "$here/../canned.csv" "$base.ncu-rep"
"""


@pytest.fixture
def fake_ncu(tmp_path: Path) -> str:
    return make_fake_ncu(tmp_path)


def make_fake_ncu(tmp_path: Path) -> str:
    """ncu's stand-in under tmp_path: runs the target, then hands back a canned report."""
    home = tmp_path / "fake-ncu"
    (home / "bin").mkdir(parents=True)
    ncu = home / "bin" / "ncu"
    ncu.write_text(FAKE_NCU)
    ncu.chmod(0o755)
    (home / "canned.csv").write_text(raw_csv())
    for folder in (tmp_path, home, home / "bin"):
        folder.chmod(folder.stat().st_mode | stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    (home / "canned.csv").chmod(0o644)
    return str(ncu)


@pytest.mark.harness
def test_a_profile_run_checks_the_profiled_call_and_keeps_both_reports(tmp_path, fake_ncu):
    problem = resolve_problem("level1/softmax")
    record = run_profile(
        problem,
        load_solution(EXAMPLES / "softmax" / "pytorch.py"),
        "cpu",
        tmp_path / "out",
        timeout_s=300,
        ncu=fake_ncu,
    )
    assert record.status == "PASSED", record.reason
    assert record.workload == pick_workload(problem, None, "cpu").name
    assert [k.name for k in record.solution_profile.kernels] == ["softmax_kernel", "void at::native::copy_kernel"]
    for side in (record.solution_profile, record.reference_profile):
        assert Path(side.report).parent == tmp_path / "out" and Path(side.report).is_file()
    assert Path(record.roofline).read_text().startswith("<svg")


@pytest.mark.harness
def test_a_wrong_solution_s_profile_says_its_call_computed_something_else(tmp_path, fake_ncu):
    wrong = tmp_path / "wrong.py"
    wrong.write_text("import torch\n\ndef solve(x):\n    return torch.softmax(x, dim=0)\n")
    record = run_profile(
        resolve_problem("level1/softmax"), load_solution(wrong), "cpu", tmp_path / "out", timeout_s=300, ncu=fake_ncu
    )
    assert record.status == "WRONG_VALUES" and "profiled call" in record.reason
    assert record.solution_profile.kernels  # the profile is still shown


@pytest.mark.harness
def test_a_solution_that_fails_under_the_profiler_gives_the_reason(tmp_path, fake_ncu):
    broken = tmp_path / "broken.py"
    broken.write_text("def solve(x):\n    raise RuntimeError('no kernel today')\n")
    record = run_profile(
        resolve_problem("level1/softmax"), load_solution(broken), "cpu", tmp_path / "out", timeout_s=300, ncu=fake_ncu
    )
    assert record.status == "RUNTIME_ERROR" and "without a report" in record.reason
    assert "no kernel today" in record.reason or "RuntimeError" in record.reason


@pytest.mark.harness
def test_the_profiled_process_runs_sandboxed_and_cannot_write_the_supervisor_s_files(tmp_path, fake_ncu):
    """The profiled call runs in the worker's sandbox: a file the supervisor owns stays as it was."""
    target = tmp_path / "supervisor-secret.txt"
    target.write_text("kept")
    target.chmod(0o644)
    nosy = tmp_path / "nosy.py"
    nosy.write_text(
        "import torch\n\ndef solve(x):\n"
        f"    try:\n        open({str(target)!r}, 'w').write('changed')\n    except OSError:\n        pass\n"
        "    return torch.softmax(x, dim=-1)\n"
    )
    record = run_profile(
        resolve_problem("level1/softmax"), load_solution(nosy), "cpu", tmp_path / "out", timeout_s=300, ncu=fake_ncu
    )
    assert record.status == "PASSED", record.reason
    assert target.read_text() == "kept"


@pytest.mark.harness
def test_a_link_planted_where_ncu_writes_its_report_is_not_followed(tmp_path, fake_ncu):
    """The solution plants a link to a root-only file of the host where its report will be
    written: the supervisor (root) used to copy the host's file into the report folder."""
    secret = tmp_path / "root-only.txt"
    secret.write_text("the host's secret")
    secret.chmod(0o600)
    planter = tmp_path / "planter.py"
    planter.write_text(  # where ncu writes: the folder its run's spec names (argv of the profiled child)
        "import json, os, sys, torch\n\ndef solve(x):\n"
        "    folder = json.load(open(sys.argv[1]))['out']\n"
        f"    os.symlink({str(secret)!r}, os.path.join(folder, 'solution.ncu-rep'))\n"
        "    return torch.softmax(x, dim=-1)\n"
    )
    record = run_profile(
        resolve_problem("level1/softmax"), load_solution(planter), "cpu", tmp_path / "out", timeout_s=300, ncu=fake_ncu
    )
    assert record.status != "PASSED"
    copies = [p for p in (tmp_path / "out").rglob("*") if p.is_file() and b"the host's secret" in p.read_bytes()]
    assert not copies, copies


def test_profile_mode_on_the_cli_needs_a_gpu_and_one_workload():
    runner = CliRunner()
    result = runner.invoke(
        app, ["run", "level1/softmax", str(EXAMPLES / "softmax" / "pytorch.py"), "--mode", "profile", "--device", "cpu"]
    )
    assert result.exit_code == 2 and "use --device cuda" in result.output
    result = runner.invoke(
        app,
        [
            "run",
            "level1/softmax",
            str(EXAMPLES / "softmax" / "pytorch.py"),
            "--mode",
            "profile",
            "--device",
            "cpu",
            "--workload",
            "a",
            "--workload",
            "b",
        ],
    )
    assert result.exit_code == 2 and "one workload" in result.output


def test_the_record_round_trips_as_json():
    record = ProfileRecord(
        problem="p",
        solution="s",
        workload="w",
        device="cuda:0",
        status="PASSED",
        solution_profile=ProfileSide(kernels=ncu_report.parse_raw_csv(raw_csv())),
    )
    again = ProfileRecord.model_validate(json.loads(record.model_dump_json()))
    assert again == record and again.solution_profile.duration_us == pytest.approx(4.48 + 1.02)
    assert os.path.basename(__file__) == "test_profile.py"


def test_evaluate_in_profile_mode_gives_a_record_with_the_reason_it_could_not_run():
    """What a runner gets for a profile job where ncu cannot run: a record, never a crash."""
    from gpuarena.harness.judge import RunOptions, evaluate

    record = evaluate(
        resolve_problem("level1/softmax"),
        load_solution(EXAMPLES / "softmax" / "pytorch.py"),
        RunOptions(device="cpu", mode="profile"),
    )
    assert record.mode == "profile" and record.status == "RUNTIME_ERROR"
    assert "use --device cuda" in record.reason and record.profile is None and record.score is None
