"""bench/fidelity.py's CPU-side logic: ncu CSV parsing, grouping kernels into calls, the
summary against the targets and the table. The GPU run checks the measurements themselves."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_fidelity", ROOT / "bench" / "fidelity.py")
fid = importlib.util.module_from_spec(_spec)
sys.modules["bench_fidelity"] = fid
_spec.loader.exec_module(fid)

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
    '"Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)
GEMM = "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_nn_align8>(T1::Params)"
REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
    "at::native::sum_functor<float, float, float>::operator ()(at::TensorIterator &)::[lambda(float, float) "
    "(instance 1)]>, unsigned int, float, 4, 4>>(T3)"
)


def _row(kid: int, name: str, unit: str, value: str, metric: str = "gpu__time_duration.sum") -> str:
    quoted = name.replace('"', '""')
    return (
        f'"{kid}","48213","python3.12","127.0.0.1","{quoted}","1","7","(128, 1, 1)","(64, 8, 1)",'
        f'"0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"'
    )


# Three calls of two kernels each, as ncu prints them: app output and ==PROF== lines first,
# quoted fields with commas inside, thousands separators, units scaled per value.
CALLS = [
    (GEMM, "usecond", "1,033.28", 1_033_280.0),
    (REDUCE, "nsecond", "5,408", 5_408.0),
    (GEMM, "msecond", "1.04", 1_040_000.0),
    (REDUCE, "nsecond", "5,376", 5_376.0),
    (GEMM, "usecond", "1,029.60", 1_029_600.0),
    (REDUCE, "usecond", "5.44", 5_440.0),
]
SAMPLE = (
    "\n".join(
        [
            "==PROF== Connected to process 48213 (/opt/torch/.venv/bin/python3.12)",
            "==WARNING== Note: Running with uncontrolled GPU clocks.",
            f"{fid.KERNELS_TAG}2",
        ]
        + [f'==PROF== Profiling "{n[:30]}" - {i}: 0%....50%....100% - 1 pass' for i, (n, *_) in enumerate(CALLS)]
        + ["==PROF== Disconnected from process 48213", HEADER]
        + [_row(i, n, u, v) for i, (n, u, v, _) in enumerate(CALLS)]
        + [_row(0, GEMM, "byte", "1,024", metric="dram__bytes_read.sum")]
    )
    + "\n"
)


def test_units_and_separators():
    assert fid.to_ns("1,234.5", "usecond") == pytest.approx(1_234_500.0)
    assert fid.to_ns("2.5", "msecond") == pytest.approx(2_500_000.0)
    assert fid.to_ns("  5,408 ", "nsecond") == 5408.0
    with pytest.raises(ValueError, match="unknown time unit"):
        fid.to_ns("1", "cycle")


def test_parse_keeps_only_the_metric_rows_in_launch_order():
    rows = fid.parse_ncu_csv(SAMPLE)
    assert [r.id for r in rows] == list(range(6))
    assert [r.name for r in rows] == [c[0] for c in CALLS]
    assert [r.ns for r in rows] == pytest.approx([c[3] for c in CALLS])
    assert fid.parse_ncu_csv("==PROF== Connected\nhello\n") == []


def test_parse_sorts_by_id_and_finds_columns_by_name():
    reordered = "\n".join(
        [
            '"Kernel Name","ID","Metric Unit","Metric Name","Metric Value"',
            '"b","2","nsecond","gpu__time_duration.sum","20"',
            '"a","1","nsecond","gpu__time_duration.sum","10"',
        ]
    )
    assert [(r.id, r.name, r.ns) for r in fid.parse_ncu_csv(reordered)] == [(1, "a", 10.0), (2, "b", 20.0)]


def test_group_nvtx_rows_into_calls():
    calls, per_call = fid.group_calls(fid.parse_ncu_csv(SAMPLE), 3)
    assert per_call == 2
    assert calls == pytest.approx([1_038_688.0, 1_045_376.0, 1_035_040.0])


def test_group_tail_skips_warmup_and_input_creation():
    rows = fid.parse_ncu_csv(SAMPLE)
    extra = [
        fid.KernelRow("48213", -3, "distribution_elementwise_grid_stride_kernel", 9e5),
        fid.KernelRow("48213", -2, GEMM, 9e5),
        fid.KernelRow("48213", -1, REDUCE, 9e5),
    ]
    calls, per_call = fid.group_calls(extra + rows, 2, per_call=fid.parse_kernel_count(SAMPLE))
    assert per_call == 2 and calls == pytest.approx([1_045_376.0, 1_035_040.0])


def test_group_refuses_a_wrong_split():
    rows = fid.parse_ncu_csv(SAMPLE)
    with pytest.raises(ValueError, match="do not split"):
        fid.group_calls(rows, 4)
    with pytest.raises(ValueError, match="launched"):
        fid.group_calls(rows[:2], 2)  # one kernel per "call": GEMM then REDUCE, not a repeat
    with pytest.raises(ValueError, match="expected"):
        fid.group_calls(rows, 4, per_call=2)


def test_kernel_count_line():
    assert fid.parse_kernel_count(SAMPLE) == 2
    assert fid.parse_kernel_count("nothing") is None


def _runs() -> list[dict]:
    runs = []
    for rep, (ncu, ga, tr, ev) in enumerate(
        [(100.0, 101.0, 110.0, 120.0), (100.0, 101.5, 111.0, 119.0), (100.5, 101.2, 109.0, 121.0)]
    ):
        runs += [
            {"op": "big", "method": "ncu", "us": ncu, "rep": rep},
            {"op": "big", "method": "gpuarena", "us": ga, "e2e_us": ga + 20, "rep": rep},
            {"op": "big", "method": "triton", "us": tr, "rep": rep},
            {"op": "big", "method": "events", "us": ev, "rep": rep},
        ]
    for rep, ga in enumerate([3.10, 3.15, 3.12]):
        runs += [
            {"op": "small", "method": "ncu", "us": 3.0, "rep": rep},
            {"op": "small", "method": "gpuarena", "us": ga, "e2e_us": 15.0, "rep": rep},
            {"op": "small", "method": "triton", "error": "boom", "rep": rep},
            {"op": "small", "method": "events", "us": 4.2, "rep": rep},
        ]
    return runs


def test_summary_ratios_spreads_and_verdict():
    result = fid.summarize(_runs(), ["big", "small"])
    big, small = result["ops"]
    assert big["ncu_us"] == 100.0 and big["methods"]["gpuarena"]["us"] == 101.2
    assert big["methods"]["gpuarena"]["ratio"] == pytest.approx(1.012)
    assert big["methods"]["gpuarena"]["spread"] == pytest.approx(101.5 / 101.0 - 1)
    assert big["methods"]["triton"]["ratio"] == pytest.approx(1.10)
    assert big["gpuarena_e2e_us"] == pytest.approx(121.2)
    assert big["spread_target"] == 0.01 and big["spread_ok"]
    assert small["spread_target"] == 0.03 and small["spread_ok"]
    assert small["methods"]["triton"]["us"] is None and small["methods"]["triton"]["ratio"] is None
    assert small["methods"]["gpuarena"]["ratio"] == pytest.approx(3.12 / 3.0)
    s = result["summary"]
    assert s["max_abs_dev"] == pytest.approx(0.04) and s["max_ok"]
    assert s["median_abs_dev"] == pytest.approx((0.012 + 0.04) / 2) and not s["median_ok"]
    assert not s["all_ok"]


def test_summary_without_ncu_gives_no_ratios():
    runs = [r for r in _runs() if r["method"] != "ncu"]
    result = fid.summarize(runs, ["big", "small"])
    assert not result["summary"]["ncu_available"] and not result["summary"]["max_ok"]
    assert result["ops"][0]["methods"]["gpuarena"]["ratio"] is None
    assert result["ops"][1]["spread_target"] == 0.03  # sized by gpuarena's own time
    assert "ncu: missing" in fid.render_markdown(result)


def test_single_repetition_has_zero_spread():
    runs = [r for r in _runs() if r["rep"] == 0]
    assert fid.summarize(runs, ["big"])["ops"][0]["methods"]["gpuarena"]["spread"] == 0.0


def test_markdown_table():
    text = fid.render_markdown(fid.summarize(_runs(), ["big", "small"]))
    lines = text.splitlines()
    assert lines[0].startswith("| op | ncu µs |") and lines[1].count("---") == 19
    assert lines[2].split(" | ")[:6] == ["| big", "100.0", "0.5%", "101.2", "1.012", "0.5%"]
    assert "| small | 3.00 |" in text and "| – | – | – |" in text
    assert "max |gpuarena/ncu − 1| over ops: 4.0% (target ≤ 5%): PASS" in text
    assert "median |gpuarena/ncu − 1| over ops: 2.6% (target ≤ 2%): FAIL" in text


def test_ncu_command_filters_on_the_nvtx_range():
    cmd = fid.ncu_command("/x/ncu", "add-16M", 20, nvtx=True)
    assert cmd[:10] == [
        "/x/ncu",
        "--metrics",
        "gpu__time_duration.sum",
        "--clock-control",
        "none",
        "--cache-control",
        "all",
        "--csv",
        "--target-processes",
        "all",
    ]
    assert cmd[cmd.index("--nvtx-include") + 1] == "fidelity_call/"
    assert cmd[-4:] == ["--ncu-child", "add-16M", "--calls", "20"]
    assert fid.ncu_command("/x/ncu", "add-16M", 20, nvtx=False)[-1] == "--count-kernels"


def _fake_ncu(tmp_path: Path, nvtx_output: str, tail_output: str) -> str:
    """An executable standing in for ncu: prints one text with --nvtx, another without."""
    (tmp_path / "nvtx.txt").write_text(nvtx_output)
    (tmp_path / "tail.txt").write_text(tail_output)
    script = tmp_path / "ncu"
    script.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"name = 'nvtx.txt' if '--nvtx' in sys.argv else 'tail.txt'\n"
        f"print(open({str(tmp_path)!r} + '/' + name).read())\n"
    )
    script.chmod(0o755)
    return str(script)


def test_run_ncu_with_nvtx_filter(tmp_path):
    run = fid.run_ncu(_fake_ncu(tmp_path, SAMPLE, ""), "matmul-4096", 3)
    assert run["filter"] == "nvtx" and run["kernels_per_call"] == 2 and run["kernels"] == [GEMM, REDUCE]
    assert run["us"] == pytest.approx(1038.688)


def test_run_ncu_falls_back_to_the_tail(tmp_path):
    tail = SAMPLE.replace(
        HEADER, HEADER + "\n" + _row(-1, "distribution_elementwise_grid_stride_kernel", "usecond", "9.0")
    )
    run = fid.run_ncu(_fake_ncu(tmp_path, "==PROF== Disconnected from process 1\n", tail), "matmul-4096", 3)
    assert run["filter"] == "tail" and run["calls_ns"] == pytest.approx([1_038_688.0, 1_045_376.0, 1_035_040.0])
    err = fid.run_ncu(_fake_ncu(tmp_path, "==ERROR== ERR_NVGPUCTRPERM\n", tail), "matmul-4096", 3)
    assert "no gpu__time_duration.sum rows" in err["error"] and err["filter"] == "nvtx"


def test_child_protocol_reports_errors_as_json_lines():
    runs = fid.run_methods("add-64K", ["no-such-method"], quick=True, timeout=120)
    assert runs == [{"op": "add-64K", "method": "no-such-method", "error": "KeyError: 'no-such-method'"}]


def test_cli_help_parses(capsys):
    with pytest.raises(SystemExit) as exit_:
        fid.main(["--help"])
    assert exit_.value.code == 0 and "--quick" in capsys.readouterr().out


def test_parent_writes_json_and_markdown(tmp_path, monkeypatch):
    """The whole parent loop with the GPU parts replaced: files, names, raw runs, errors."""
    import torch

    fake_us = {"gpuarena": 101.0, "triton": 110.0, "events": 120.0, "held": 102.0, "hw": 100.5}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(fid, "find_ncu", lambda: "/x/ncu")
    monkeypatch.setattr(
        fid,
        "environment",
        lambda ncu: {
            "device": "NVIDIA H100 80GB HBM3",
            "driver": "580.1",
            "torch": "2.11",
            "triton": "3.6",
            "ncu_version": "V",
            "date": "today",
            "command": "python3 bench/fidelity.py",
        },
    )
    monkeypatch.setattr(
        fid,
        "run_methods",
        lambda op, methods, quick: [
            {"op": op, "method": m, "us": fake_us[m], "e2e_us": 130.0, "timer_method": "cupti-device-time"}
            if m != "events"
            else {"op": op, "method": m, "error": "exit 1: boom"}
            for m in methods
        ],
    )
    monkeypatch.setattr(fid, "run_ncu", lambda ncu, op, n: {"op": op, "method": "ncu", "us": 100.0})
    assert fid.main(["--ops", "add-16M,matmul-512", "--reps", "2", "--out", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "fidelity-NVIDIA-H100-80GB-HBM3.json").read_text())
    assert len(data["runs"]) == 2 * 2 * 6 and {r["rep"] for r in data["runs"]} == {0, 1}
    assert data["summary"]["max_abs_dev"] == pytest.approx(0.01) and data["settings"]["reps"] == 2
    assert data["environment"]["gpuarena_timer"] == ["cupti-device-time"]
    md = (tmp_path / "fidelity-NVIDIA-H100-80GB-HBM3.md").read_text()
    assert "| add-16M | 100.0 |" in md and "- error, matmul-512 events rep 2: exit 1: boom" in md


def test_methods_option_limits_what_runs(tmp_path, monkeypatch):
    """--methods picks the methods measured (ncu always runs); an unknown one is refused."""
    import torch

    asked: list[list[str]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(fid, "find_ncu", lambda: "/x/ncu")
    monkeypatch.setattr(
        fid,
        "environment",
        lambda ncu: {
            "device": "GPU",
            "driver": "1",
            "torch": "2",
            "triton": "3",
            "ncu_version": "V",
            "date": "d",
            "command": "c",
        },
    )
    monkeypatch.setattr(
        fid,
        "run_methods",
        lambda op, methods, quick: asked.append(methods) or [{"op": op, "method": m, "us": 2.0} for m in methods],
    )
    monkeypatch.setattr(fid, "run_ncu", lambda ncu, op, n: {"op": op, "method": "ncu", "us": 2.0})
    assert fid.main(["--ops", "add-64K", "--reps", "1", "--methods", "held", "--out", str(tmp_path)]) == 0
    assert asked == [["held"]]
    data = json.loads((tmp_path / "fidelity-GPU.json").read_text())
    assert sorted(r["method"] for r in data["runs"]) == ["held", "ncu"]
    assert data["ops"][0]["methods"]["held"]["ratio"] == 1.0
    assert fid.main(["--ops", "add-64K", "--methods", "held,nope", "--out", str(tmp_path)]) == 2


def test_the_ncu_duration_figure_gets_its_own_verdict():
    runs = _runs() + [
        {"op": op, "method": "hw", "us": us, "rep": rep}
        for rep in range(3)
        for op, us in (("big", 100.4), ("small", 3.01 + 0.01 * rep))
    ]
    result = fid.summarize(runs, ["big", "small"])
    hw = result["summary"]["hw"]
    assert hw["max_abs_dev"] == pytest.approx(3.02 / 3.0 - 1) and hw["all_ok"]
    assert not result["summary"]["all_ok"]  # the stream cost's verdict is its own
    text = fid.render_markdown(result)
    assert "**hw** (the ncu Duration records carry)" in text and "max |hw/ncu − 1| over ops: 0.7%" in text
    assert "median |hw/ncu − 1| over ops: 0.5% (target ≤ 2%): PASS" in text
    assert "**gpuarena** (the stream cost, ranked)" in text
