"""bench/peer_kernelbench.py without a GPU: its arguments, the table from a made-up result, the
record's figures, and KernelBench's side end to end against a stand-in KernelBench package
(its eval returns a fixed verdict; its utils imports LLM clients, stood in for where missing),
so the script cannot rot unnoticed between GPU runs."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("bench_peer_kernelbench", ROOT / "bench" / "peer_kernelbench.py")
assert _spec is not None and _spec.loader is not None
pk = importlib.util.module_from_spec(_spec)
sys.modules["bench_peer_kernelbench"] = pk
_spec.loader.exec_module(pk)
# its parts in bench/ (the script put bench/ on sys.path): the same modules the script imported
common = importlib.import_module("peer_common")
kb_eval = importlib.import_module("peer_kernelbench_eval")
kb_solutions = importlib.import_module("peer_kernelbench_solutions")


def test_arguments():
    with pytest.raises(SystemExit) as exit_:
        pk.main(["--help"])
    assert exit_.value.code == 0
    assert pk.problem_names(None) == list(pk.DEFAULT_PROBLEMS)
    assert pk.problem_names("level1/19_ReLU.py, level1/19_ReLU,level2/12_X") == ["level1/19_ReLU", "level2/12_X"]
    assert pk.parse_solution("level1/2_X=sol.py:triton") == ("level1/2_X", Path("sol.py"), "triton")
    assert pk.parse_solution("level1/2_X.py=sol.py") == ("level1/2_X", Path("sol.py"), "cuda")
    args = pk.build_parser().parse_args(["--kernelbench", "kb", "--out", "o", "--repeat", "3", "--problems", "a/b"])
    assert (args.repeat, args.problems, args.out) == (3, "a/b", Path("o"))
    assert set(kb_solutions.SOLUTIONS) == set(pk.DEFAULT_PROBLEMS)
    assert (
        kb_eval.gpu_arch((9, 0)) == "Hopper"
        and kb_eval.gpu_arch((8, 9)) == "Ada"
        and kb_eval.gpu_arch((8, 0)) == "Ampere"
    )


def _fake_result() -> dict:
    kb_run = {"wall_s": 10.0, "correctness": True, "compiled": True, "runtime_us": 110.0, "stubbed": ["openai"]}
    ga_run = {"wall_s": 15.0, "status": "PASSED", "median_us": 101.0, "kernel_duration_us": 102.0, "workloads": []}
    return {
        "device": "NVIDIA H200",
        "command": "python3 bench/peer_kernelbench.py --repeat 2",
        "repeat": 2,
        "ncu": "/usr/local/cuda/bin/ncu",
        "problems": [
            {
                "name": "level1/19_ReLU",
                "backend": "triton",
                "kernelbench": [kb_run, kb_run | {"wall_s": 12.0}],
                "gpuarena": [ga_run, ga_run | {"wall_s": 17.0}],
                "ncu": {"us": 100.0, "kernels": ["_clamp_below_zero"]},
            },
            {  # every side failed: the table still renders
                "name": "level1/23_Softmax",
                "backend": "cuda",
                "kernelbench": [{"wall_s": 300.0, "error": "timed out after 300 s", "stderr": "..."}],
                "gpuarena": [{"wall_s": None, "error": "not imported (see the import's output)"}],
                "ncu": {"error": "ncu gave no rows"},
            },
        ],
        "import": "imported ...",
    }


def test_table_from_a_made_up_result():
    result = _fake_result()
    s = pk.summarize(result["problems"][0])
    assert (s["kb_wall_s"], s["ga_wall_s"], s["ncu_us"]) == (11.0, 16.0, 100.0)
    assert s["kb_over_ncu"] == pytest.approx(1.1) and s["ga_over_ncu"] == pytest.approx(1.01)
    assert s["ga_record_ncu_over_ncu"] == pytest.approx(1.02) and s["wall_ga_over_kb"] == pytest.approx(16 / 11)
    md = pk.markdown(result)
    row = next(line for line in md.splitlines() if line.startswith("| level1/19_ReLU"))
    assert (
        "| 11.00 |" in row and "| 110.0 |" in row and "| 1.100 |" in row and "| 1.010 |" in row and "| 1.020 |" in row
    )
    failed = next(line for line in md.splitlines() if line.startswith("| level1/23_Softmax"))
    assert "not imported" in failed and "–" in failed
    assert "timed out after 300 s" in md and "ncu gave no rows" in md
    assert "never called by its eval): openai." in md


def test_the_kernelbench_workload_is_the_problems():
    record = {
        "status": "PASSED",
        "duration_s": 9.0,
        "phases": {"timing": 1.0},
        "workloads": [
            {"name": "kernelbench", "status": "PASSED", "time": {"median_us": 50.0, "kernel_duration_us": 51.0}},
            {"name": "cpu-small", "status": "PASSED", "time": {"median_us": 5.0}},
        ],
    }
    got = common.record_figures(record)
    assert (got["workload"], got["median_us"], got["kernel_duration_us"]) == ("kernelbench", 50.0, 51.0)
    assert [w["name"] for w in got["workloads"]] == ["kernelbench", "cpu-small"]


FAKE_UTILS = """
from dotenv import load_dotenv
load_dotenv()
from openai import OpenAI
from litellm import completion

def set_gpu_arch(arch_list):
    pass
"""

FAKE_EVAL = """
import json
from pydantic import BaseModel
from . import utils


class KernelExecResult(BaseModel):
    compiled: bool = False
    correctness: bool = False
    metadata: dict = {}
    runtime: float = -1.0
    runtime_stats: dict = {}
    ref_runtime: float = -1.0
    ref_runtime_stats: dict = {}


def get_torch_dtype_from_string(precision):
    return precision


def eval_kernel_against_ref(original_model_src, custom_model_src, **kwargs):
    print("[Eval] a line of KernelBench's own")
    if "BROKEN" in custom_model_src:
        raise RuntimeError("the solution broke")
    seen = {k: str(v) for k, v in kwargs.items()}
    return KernelExecResult(compiled=True, correctness=True, runtime=0.125, ref_runtime=0.25, metadata=seen)
"""


def _fake_kernelbench(root: Path) -> Path:
    package = root / "src" / "kernelbench"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import utils\n")
    (package / "utils.py").write_text(textwrap.dedent(FAKE_UTILS))
    (package / "eval.py").write_text(textwrap.dedent(FAKE_EVAL))
    (package / "kernel_static_checker.py").write_text(
        "def validate_kernel_static(code, backend='cuda', precision='fp16'):\n    return True, [], []\n"
    )
    return root


def test_kernelbench_side_against_a_stand_in(tmp_path):
    kb = _fake_kernelbench(tmp_path / "kb")
    problem = tmp_path / "19_ReLU.py"
    problem.write_text("# a problem file\n")
    solution = tmp_path / "sol.py"
    solution.write_text(kb_solutions.SOLUTIONS["level1/19_ReLU"][1])
    row = pk.run_kernelbench(kb, problem, solution, "triton", tmp_path / "scratch", timeout=120)
    assert row.get("error") is None, row
    assert row["correctness"] is True and row["compiled"] is True
    assert row["runtime_us"] == pytest.approx(125.0) and row["ref_runtime_us"] == pytest.approx(250.0)
    assert row["static"] == {"valid": True, "errors": [], "warnings": []}
    assert row["metadata"]["num_perf_trials"] == "100" and row["metadata"]["backend"] == "triton"
    for name in ("openai", "litellm", "dotenv"):  # stood in for only where missing
        assert (name in row["stubbed"]) == (importlib.util.find_spec(name) is None)

    solution.write_text("BROKEN")
    row = pk.run_kernelbench(kb, problem, solution, "cuda", tmp_path / "scratch", timeout=120)
    assert row["correctness"] is False and "the solution broke" in row["error"]

    (kb / "src" / "kernelbench" / "eval.py").write_text("import not_a_package_anywhere\n")
    row = pk.run_kernelbench(kb, problem, solution, "cuda", tmp_path / "scratch", timeout=120)
    assert "no result line" in row["error"] and "not_a_package_anywhere" in row["stderr"]


def test_a_hung_side_is_killed_and_recorded():
    done = common.run_process([sys.executable, "-c", "import time; time.sleep(60)"], timeout=1)
    assert done["timed_out"] and done["wall_s"] < 30
