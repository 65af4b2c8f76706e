"""The evaluation suite: each framework's implementation of a problem judged as a solution (return
and destination problems), the result file, and the score against a baseline computed by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from gpuarena.errors import GpuarenaError
from gpuarena.harness.supervisor import RunOptions, evaluate
from gpuarena.problems import load_problem, resolve_problem
from gpuarena.suite.frameworks import framework_solution
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.run import discover, select
from gpuarena.suite.score import compare
from tests.conftest import FIXTURES, ROOT


def test_a_framework_s_implementation_passes_return_and_destination_problems() -> None:
    for problem in (resolve_problem("level1/softmax"), load_problem(FIXTURES / "problems" / "axpy_dest")):
        record = evaluate(problem, framework_solution(problem, "pytorch"), RunOptions(device="cpu", mode="test"))
        assert record.status == "PASSED", (problem.id, record.reason, record.log[-2000:])
    with pytest.raises(GpuarenaError, match="framework 'tensorflow'"):
        framework_solution(resolve_problem("level1/softmax"), "tensorflow")


def test_problems_are_picked_by_pattern_level_and_tag() -> None:
    problems = discover()
    assert [p.id for p in select(problems, ["level1/s*"])] == ["level1/softmax"]
    assert {p.spec.level for p in select(problems, levels=[2])} == {2}
    assert len(select(problems)) == len(problems) >= 23
    with pytest.raises(GpuarenaError, match="no problem matches"):
        select(problems, ["nothing/*"])


def result(framework: str, times: dict[str, tuple[float, float, float] | None], weights=None) -> SuiteResult:
    weights = weights or {}
    problems = [ProblemTime(problem=name, level=int(name[5]), weight=weights.get(name, 1.0),
                            status="PASSED" if t else "RUNTIME_ERROR",
                            **({"time_us": t[0], "low_us": t[1], "high_us": t[2]} if t else {}))
                for name, t in times.items()]
    return SuiteResult(framework=framework, device="cuda", device_name="GPU", environment={}, command="x",
                       problems=problems)


def test_the_score_is_the_weighted_geometric_mean_of_the_ratios_by_hand() -> None:
    base = result("pytorch", {"level1/a": (100, 90, 110), "level1/b": (50, 45, 55), "level2/c": (10, 9, 11),
                              "level2/d": (7, 7, 7)})
    other = result("torch-compile", {"level1/a": (50, 45, 55), "level1/b": (100, 90, 110), "level2/c": (5, 4, 6),
                                     "level2/d": None, "level3/e": (1, 1, 1)}, weights={"level2/c": 2.0})
    c = compare(base, other)
    # ratios: a 2, b 0.5, c 2 (weight 2): exp((ln2 - ln2 + 2 ln2) / 4) = 2 ** 0.5
    assert math.isclose(c.score, 2 ** 0.5)
    assert c.covered == 3 and c.left_out == {"level2/d": "not timed: RUNTIME_ERROR", "level3/e": "not in the baseline"}
    assert [r.problem for r in c.ratios] == ["level1/b", "level1/a", "level2/c"]  # slowest against the baseline first
    a = next(r for r in c.ratios if r.problem == "level1/a")
    assert math.isclose(a.low, 90 / 55) and math.isclose(a.high, 110 / 45)
    assert c.low < c.score < c.high and math.isclose(c.by_level[1], 1.0) and math.isclose(c.by_level[2], 2.0)
    with pytest.raises(GpuarenaError, match="no timed problem in common"):
        compare(base, result("pytorch", {"level3/e": (1, 1, 1)}))


def test_suite_run_and_compare_from_the_command_line(tmp_path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gpuarena", "suite", *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=600, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})

    done = cli("run", "--device", "cpu", "--problems", "level1/add", "--problems", "level1/softmax", "--budget", "0.2",
               "-o", "base.json")
    assert done.returncode == 0, done.stderr
    written = SuiteResult.model_validate_json((tmp_path / "base.json").read_text())
    assert [p.problem for p in written.problems] == ["level1/add", "level1/softmax"]
    assert all(p.status == "PASSED" and p.low_us <= p.time_us <= p.high_us for p in written.problems)
    faster = written.model_copy(update={"problems": [p.model_copy(update={
        "time_us": p.time_us / 2, "low_us": p.low_us / 2, "high_us": p.high_us / 2}) for p in written.problems]})
    (tmp_path / "faster.json").write_text(faster.model_dump_json())
    shown = cli("compare", "base.json", "faster.json", "--json")
    assert shown.returncode == 0, shown.stderr
    assert math.isclose(json.loads(shown.stdout)["score"], 2.0)
    (tmp_path / "bad.json").write_text("{}")
    refused = cli("compare", "base.json", "bad.json")
    assert refused.returncode == 2 and "not a suite result" in " ".join(refused.stderr.split())


def test_the_shipped_baseline_covers_every_bundled_problem() -> None:
    from gpuarena.suite.cli import SHIPPED_BASELINE

    baseline = SuiteResult.model_validate_json(SHIPPED_BASELINE.read_text())
    assert baseline.framework == "pytorch" and "H100" in baseline.device_name
    assert {p.problem for p in baseline.problems} == {p.id for p in discover()}
    assert all(p.status == "PASSED" and p.time_us > 0 for p in baseline.problems)
