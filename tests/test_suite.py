"""The evaluation suite: each framework's implementation of a problem judged as a solution (return
and destination problems), the result file, and the score against a baseline computed by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings

import pytest
from tests.conftest import FIXTURES, ROOT

from gpuarena.errors import GpuarenaError
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import load_problem, resolve_problem
from gpuarena.problems.select import ProblemFilter, select
from gpuarena.suite.frameworks import framework_solution
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.plots import ratio_bars
from gpuarena.suite.run import discover
from gpuarena.suite.score import compare, model_tags


@pytest.mark.harness
def test_a_framework_s_implementation_passes_return_and_destination_problems() -> None:
    for problem in (resolve_problem("level1/softmax"), load_problem(FIXTURES / "problems" / "axpy_dest")):
        record = evaluate(problem, framework_solution(problem, "pytorch"), RunOptions(device="cpu", mode="test"))
        assert record.status == "PASSED", (problem.id, record.reason, record.log[-2000:])
    with pytest.raises(GpuarenaError, match="framework 'tensorflow'"):
        framework_solution(resolve_problem("level1/softmax"), "tensorflow")


def test_problems_are_picked_by_pattern_level_tag_model_and_source() -> None:
    problems = discover()
    assert [p.id for p in select(problems, ProblemFilter.of(["level1/s*"]))] == ["level1/softmax"]
    assert {p.spec.level for p in select(problems, ProblemFilter.of(levels=[2]))} == {2}
    assert len(select(problems, ProblemFilter())) == len(problems) >= 23
    by_model = select(problems, ProblemFilter.of(models=["GPT-2"]))
    assert by_model and all(any("gpt-2" in m.lower() for m in p.spec.provenance.models) for p in by_model)
    assert len(by_model) < len(problems)
    llama_level2 = select(problems, ProblemFilter.of(levels=[2], models=["llama"]))  # every filter holds
    assert llama_level2 and all(p.spec.level == 2 for p in llama_level2)
    assert select(problems, ProblemFilter.of(frameworks=["PyTorch"])) == [
        p for p in problems if p.spec.provenance.framework == "pytorch"
    ]
    with pytest.raises(GpuarenaError, match=r"no problem matches the filters \(id nothing/\*; source jax\)"):
        select(problems, ProblemFilter.of(["nothing/*"], frameworks=["jax"]))


def test_the_commands_that_take_many_problems_filter_them_alike(tmp_path) -> None:
    from typer.testing import CliRunner

    from gpuarena.cli.app import app

    listed = CliRunner().invoke(app, ["list", "--json", "--level", "1", "--tag", "softmax"])
    assert listed.exit_code == 0, listed.output
    assert [row["id"] for row in json.loads(listed.output)] == ["level1/softmax"]
    checked = CliRunner().invoke(app, ["check", str(ROOT / "problems"), "--match", "level1/softmax"])
    assert checked.exit_code == 0 and "1 of 1 problems ok" in checked.output, checked.output
    none = CliRunner().invoke(app, ["check", str(ROOT / "problems"), "--model", "no such model"])
    assert none.exit_code != 0 and "no problem matches the filters (model no such model)" in none.output
    ran = CliRunner().invoke(app, ["suite", "run", "--source", "jax", "-o", str(tmp_path / "s.json")])
    assert ran.exit_code != 0 and "no problem matches the filters (source jax)" in ran.output


def result(framework: str, times: dict[str, tuple[float, float, float] | None], weights=None, tags=None) -> SuiteResult:
    weights, tags = weights or {}, tags or {}
    problems = [
        ProblemTime(
            problem=name,
            level=int(name[5]),
            weight=weights.get(name, 1.0),
            tags=tags.get(name, []),
            status="PASSED" if t else "RUNTIME_ERROR",
            **({"time_us": t[0], "low_us": t[1], "high_us": t[2]} if t else {}),
        )
        for name, t in times.items()
    ]
    return SuiteResult(
        framework=framework, device="cuda", device_name="GPU", environment={}, command="x", problems=problems
    )


def test_the_score_is_the_weighted_geometric_mean_of_the_ratios_by_hand() -> None:
    base = result(
        "pytorch",
        {"level1/a": (100, 90, 110), "level1/b": (50, 45, 55), "level2/c": (10, 9, 11), "level2/d": (7, 7, 7)},
    )
    other = result(
        "torch-compile",
        {
            "level1/a": (50, 45, 55),
            "level1/b": (100, 90, 110),
            "level2/c": (5, 4, 6),
            "level2/d": None,
            "level3/e": (1, 1, 1),
        },
        weights={"level2/c": 2.0},
    )
    c = compare(base, other)
    # ratios: a 2, b 0.5, c 2 (weight 2): exp((ln2 - ln2 + 2 ln2) / 4) = 2 ** 0.5
    assert math.isclose(c.score, 2**0.5)
    assert c.covered == 3 and c.left_out == {
        "level2/d": "failed in the result: RUNTIME_ERROR",
        "level3/e": "not in the baseline",
    }
    assert [r.problem for r in c.ratios] == ["level1/b", "level1/a", "level2/c"]  # slowest against the baseline first
    a = next(r for r in c.ratios if r.problem == "level1/a")
    assert math.isclose(a.low, 90 / 55) and math.isclose(a.high, 110 / 45)
    assert c.low < c.score < c.high and math.isclose(c.by_level[1], 1.0) and math.isclose(c.by_level[2], 2.0)
    with pytest.raises(GpuarenaError, match="no timed problem in common"):
        compare(base, result("pytorch", {"level3/e": (1, 1, 1)}))


def test_the_interval_over_problem_sets_is_the_resampled_score_s_and_repeats() -> None:
    """The second interval: the score over the problem set drawn again with replacement. Its
    ends lie between the smallest and the largest ratio, it holds the score, it is the same at
    every call (seeded), it is a point when every problem has the same ratio, and it widens as
    the problems disagree more."""
    from gpuarena.suite.score import problem_interval

    names = [f"level1/p{i}" for i in range(12)]
    base = result("pytorch", {n: (100, 99, 101) for n in names})
    mixed = result("torch-compile", {n: ((50, 49, 51) if i % 2 else (200, 198, 202)) for i, n in enumerate(names)})
    c = compare(base, mixed)
    assert math.isclose(c.score, 1.0)
    assert 0.5 < c.problems_low < c.score < c.problems_high < 2.0
    assert (c.problems_low, c.problems_high) == (compare(base, mixed).problems_low, compare(base, mixed).problems_high)
    alike = compare(base, result("torch-compile", {n: (50, 49, 51) for n in names}))
    assert math.isclose(alike.problems_low, 2.0) and math.isclose(alike.problems_high, 2.0)
    narrow = problem_interval([0.9, 1.1] * 6, [1.0] * 12)
    wide = problem_interval([0.5, 2.0] * 6, [1.0] * 12)
    assert wide[1] / wide[0] > narrow[1] / narrow[0]
    # a problem of weight 0 moves nothing: the interval is the one without it
    assert all(math.isclose(end, 2.0) for end in problem_interval([2.0, 2.0, 100.0], [1.0, 1.0, 0.0]))


def test_the_score_by_model_counts_each_problem_for_every_model_it_came_from() -> None:
    tags = {
        "level1/a": ["aten.mm.default", "harvested", "llama", "prefill"],
        "level1/b": ["module:LlamaMLP", "harvested", "llama", "prefill", "qwen3", "decode"],
        "level2/c": ["harvested", "qwen3", "decode"],
        "level2/d": ["hand-written", "softmax"],
    }  # not harvested: no model
    base = result("pytorch", {name: (100, 90, 110) for name in tags}, tags=tags)
    other = result(
        "torch-compile",
        {"level1/a": (50, 45, 55), "level1/b": (200, 180, 220), "level2/c": (12.5, 10, 15), "level2/d": (100, 90, 110)},
        tags=tags,
    )
    c = compare(base, other)
    assert model_tags(tags["level1/b"], "module:LlamaMLP") == ["llama", "qwen3"] and model_tags(tags["level2/d"]) == []
    assert set(c.by_model) == {"llama", "qwen3"}
    assert math.isclose(c.by_model["llama"], 1.0)  # a 2x, b 0.5x
    assert math.isclose(c.by_model["qwen3"], 2.0)  # b 0.5x, c 8x
    svg = ratio_bars(list(c.by_model.items()), "score by model")
    assert svg.startswith("<svg") and svg.count("<rect") == 2 and "llama" in svg and "2x" in svg
    assert "<script" not in ratio_bars([("<script>alert(1)</script>", 1.5)], "t")  # labels are escaped


@pytest.mark.e2e
def test_suite_run_and_compare_from_the_command_line(tmp_path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "gpuarena", "suite", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,
            env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")},
        )

    done = cli(
        "run",
        "--device",
        "cpu",
        "--problems",
        "level1/add",
        "--problems",
        "level1/softmax",
        "--budget",
        "0.2",
        "-o",
        "base.json",
    )
    assert done.returncode == 0, done.stderr
    written = SuiteResult.model_validate_json((tmp_path / "base.json").read_text())
    assert [p.problem for p in written.problems] == ["level1/add", "level1/softmax"]
    assert all(p.status == "PASSED" and p.low_us <= p.time_us <= p.high_us for p in written.problems), [
        (p.problem, p.status, p.reason) for p in written.problems
    ]
    faster = written.model_copy(
        update={
            "problems": [
                p.model_copy(update={"time_us": p.time_us / 2, "low_us": p.low_us / 2, "high_us": p.high_us / 2})
                for p in written.problems
            ]
        }
    )
    (tmp_path / "faster.json").write_text(faster.model_dump_json())
    shown = cli("compare", "base.json", "faster.json", "--json")
    assert shown.returncode == 0, shown.stderr
    assert math.isclose(json.loads(shown.stdout)["score"], 2.0)
    drawn = cli("compare", "base.json", "faster.json", "--plots", "plots")
    assert drawn.returncode == 0, drawn.stderr
    levels = (tmp_path / "plots" / "by-level.svg").read_text()
    assert levels.startswith("<svg") and "level 1" in levels and "2.00" in levels  # both problems twice as fast
    assert "level1/softmax" in (tmp_path / "plots" / "slowest.svg").read_text()
    (tmp_path / "bad.json").write_text("{}")
    refused = cli("compare", "base.json", "bad.json")
    assert refused.returncode == 2 and "not a suite result" in " ".join(refused.stderr.split())


def test_the_shipped_baselines_cover_the_bundled_problems_and_the_dataset() -> None:
    """Each default baseline times its problem set, every problem PASSED, and `suite run` picks
    the one that times the most of the chosen problems."""
    from gpuarena.cli.suite_cli import SHIPPED_BASELINES, shipped_baseline
    from gpuarena.suite.frameworks import implements
    from gpuarena.suite.run import all_problems

    bundled = {p.id for p in discover()}
    # the baselines are PyTorch's: they time the problems written in PyTorch (the JAX harvests' are JAX's)
    # a problem not yet checked on a GPU (written on a machine without one) has no GPU time yet
    dataset = {
        p.id
        for p in all_problems([ROOT / "dataset" / "problems"])
        if implements(p, "pytorch") and "cuda" not in p.spec.unchecked
    }
    assert shipped_baseline(bundled) == SHIPPED_BASELINES / "H100-pytorch.json"
    assert shipped_baseline(dataset) == SHIPPED_BASELINES / "H200-pytorch-dataset.json"
    assert shipped_baseline({"level9/nothing"}) is None
    jax_dataset = {p.id for p in all_problems([ROOT / "dataset" / "problems"]) if implements(p, "jax")}
    assert jax_dataset and shipped_baseline(jax_dataset) == SHIPPED_BASELINES / "H200-jax-dataset.json"
    jax_baseline = SuiteResult.model_validate_json((SHIPPED_BASELINES / "H200-jax-dataset.json").read_text())
    assert jax_baseline.framework == "jax" and {p.problem for p in jax_baseline.problems} == jax_dataset
    assert all(p.status == "PASSED" for p in jax_baseline.problems)
    baseline = SuiteResult.model_validate_json((SHIPPED_BASELINES / "H100-pytorch.json").read_text())
    assert baseline.framework == "pytorch" and "H100" in baseline.device_name
    assert {p.problem for p in baseline.problems} == bundled
    assert all(p.status == "PASSED" and p.time_us > 0 for p in baseline.problems)
    # the dataset's baseline: every PyTorch problem of the merged dataset on the lent H200 (2026-12-01,
    # issue 48), read with the weights of `dataset weigh` (suite restamp); nothing left out
    timed = SuiteResult.model_validate_json((SHIPPED_BASELINES / "H200-pytorch-dataset.json").read_text())
    assert {p.problem for p in timed.problems} == dataset and not timed.left_out
    assert all(p.status == "PASSED" and p.time_us > 0 for p in timed.problems)
    # on a GPU the real sizes alone: no CPU-sized workload is in a time
    assert not [p.problem for p in timed.problems if any(w.startswith("small") for w in p.workloads)]
    (sort,) = [p for p in timed.problems if p.problem.startswith("level1/sort-")]  # the four sorts: one problem
    assert set(sort.workloads) == {"mixtral-prefill", "qwen2moe-prefill", "qwen3moe-decode", "qwen3moe-prefill"}


@pytest.mark.e2e
def test_a_run_spread_over_several_processes_merges_in_order_and_names_a_dead_one(tmp_path, monkeypatch) -> None:
    """Each slot's process times its share (real processes, the CPU here, a GPU each on a GPU
    host); the result lists the problems in their order, and a slot whose process dies leaves its
    problems as ERROR with the reason, not silently out."""
    from gpuarena.suite.shard import gpu_slots, run_sharded, split

    problems = [resolve_problem(name) for name in ("level1/add", "level1/softmax", "level1/gelu")]
    assert [[p.id for p in share] for share in split(problems, 2)] == [
        ["level1/add", "level1/gelu"],
        ["level1/softmax"],
    ]
    seen: list[SuiteResult] = []
    result = run_sharded(problems, "pytorch", "cpu", 0.1, [{}, {}], checkpoint=seen.append)
    assert [p.problem for p in result.problems] == ["level1/add", "level1/softmax", "level1/gelu"]
    failed = [(p.problem, p.status, p.reason) for p in result.problems if p.status != "PASSED" or not p.time_us]
    assert not failed, failed  # the reasons whole: a repr of the records cuts them
    assert len(seen) == 3 and result.device_name and result.framework == "pytorch"
    dies = tmp_path / "dies"
    dies.mkdir()
    (dies / "sitecustomize.py").write_text("import os\nos._exit(3)\n")
    broken = run_sharded(problems, "pytorch", "cpu", 0.1, [{}, {"PYTHONPATH": str(dies)}])
    assert [p.status for p in broken.problems] == ["PASSED", "ERROR", "PASSED"]
    assert "slot 1 exited with code 3" in broken.problems[1].reason
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,GPU-5")
    assert gpu_slots(0) == [{"CUDA_VISIBLE_DEVICES": "3"}, {"CUDA_VISIBLE_DEVICES": "GPU-5"}]
    assert gpu_slots(1) == [{"CUDA_VISIBLE_DEVICES": "3"}]
    with pytest.raises(GpuarenaError, match="only 2 GPU"):
        gpu_slots(3)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(GpuarenaError, match="no CUDA device"):
        gpu_slots(0)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")  # then the runner's own GPU detection: none on a CPU host
    from gpuarena.host_devices import detect

    if not detect(cpu=False):
        with pytest.raises(GpuarenaError, match="no CUDA device"):
            gpu_slots(0)


def test_gpus_is_refused_off_cuda(tmp_path) -> None:
    from typer.testing import CliRunner

    from gpuarena.cli.app import app

    ran = CliRunner().invoke(
        app,
        ["suite", "run", "--device", "cpu", "--gpus", "2", "--problems", "level1/add", "-o", str(tmp_path / "s.json")],
    )
    assert ran.exit_code != 0 and "--gpus is for --device cuda" in ran.output
    assert not (tmp_path / "s.json").exists()


@pytest.mark.harness
def test_a_problem_whose_reference_is_jax_is_judged_checked_and_timed_as_jax() -> None:
    """A reference written in JAX (provenance.framework = "jax") is called through DLPack by the
    harness: `gpuarena check` passes it, a PyTorch solution is judged against it, and the suite's
    jax framework times it as a JAX solution; pytorch has no implementation of it, nor jax of a
    PyTorch problem (the suite leaves those out)."""
    from gpuarena.harness.problem_check import check_problem
    from gpuarena.solutions.model import Solution, SolutionManifest
    from gpuarena.suite.frameworks import implements
    from gpuarena.suite.run import run_suite

    problem = load_problem(FIXTURES / "jax_problems" / "jax_rmsnorm")
    assert problem.input_names == ["x", "scale"]
    report = check_problem(problem.path)
    assert report.ok, report.errors
    torch_solution = Solution(
        name="rms",
        manifest=SolutionManifest(language="pytorch", entry_point="s.py:solve"),
        sources={
            "s.py": "import torch\n\ndef solve(x, scale):\n    w = x.float()\n"
            "    return (w * torch.rsqrt(w.pow(2).mean(-1, keepdim=True) + 1e-6)"
            " * scale.float()).to(x.dtype)\n"
        },
    )
    record = evaluate(problem, torch_solution, RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", (record.reason, record.log[-2000:])
    wrong = torch_solution.model_copy(update={"sources": {"s.py": "def solve(x, scale):\n    return x * scale\n"}})
    assert evaluate(problem, wrong, RunOptions(device="cpu", mode="test")).status == "WRONG_VALUES"
    record = evaluate(problem, framework_solution(problem, "jax"), RunOptions(device="cpu", mode="test"))
    assert record.status == "PASSED", (record.reason, record.log[-2000:])
    softmax = resolve_problem("level1/softmax")
    assert implements(problem, "jax") and not implements(problem, "pytorch") and not implements(softmax, "jax")
    with pytest.raises(GpuarenaError, match="written in jax, so pytorch has no implementation"):
        framework_solution(problem, "pytorch")
    said: list[str] = []
    with warnings.catch_warnings(record=True) as warned:  # JAX's fork warning: subprocess execs at once
        timed = run_suite([problem, softmax], "jax", "cpu", 0.1, progress=said.append)
    assert not [w for w in warned if "os.fork" in str(w.message)]
    assert [(p.problem, p.status) for p in timed.problems] == [("jax_rmsnorm", "PASSED")]
    assert timed.problems[0].time_us > 0 and timed.framework == "jax"
    import jax

    # float32 dot products in float32, as PyTorch's (JAX's default takes TF32 on recent GPUs)
    assert jax.config.jax_default_matmul_precision == "highest"
    assert any("level1/softmax: its reference is written in pytorch, no jax implementation" in s for s in said)


def _slow_add(tmp_path):
    """level1/add whose reference, the suite's implementation under pytorch, never returns in the
    worker (where the solution's copy of reference.py lives outside the problem's folder); the
    supervisor's own reference, in the folder, computes the expected outputs at once."""
    import shutil

    folder = tmp_path / "level1" / "slow_add"
    shutil.copytree(resolve_problem("level1/add").path, folder)
    reference = folder / "reference.py"
    reference.write_text(
        reference.read_text()
        .replace("import torch\n", f"import os\nimport time\n\nimport torch\n\nHOME = {str(folder)!r}\n", 1)
        .replace(
            '    """y = a + b',
            "    if os.path.dirname(os.path.abspath(__file__)) != HOME:\n        time.sleep(3600)\n"
            + '    """y = a + b',
            1,
        )
    )
    return load_problem(folder, root=tmp_path)


@pytest.mark.harness
def test_a_problem_past_the_suite_s_time_limit_is_a_timeout_and_the_suite_goes_on(tmp_path) -> None:
    """--time-limit caps each problem's run (torch.compile spent over 500 s building Mamba's
    selective scan on an H200, stop 71, and held the whole suite): past it the problem is TIMEOUT
    with the reason, and the next one is timed, in one process and spread over processes."""
    from gpuarena.suite.run import run_suite
    from gpuarena.suite.shard import run_sharded

    problems = [_slow_add(tmp_path), resolve_problem("level1/add")]
    for result in (
        run_suite(problems, "pytorch", "cpu", 0.05, time_limit_s=8.0),
        run_sharded(problems, "pytorch", "cpu", 0.05, [{}], time_limit_s=8.0),
    ):
        slow, add = result.problems
        assert (slow.problem, slow.status, slow.time_us) == ("level1/slow_add", "TIMEOUT", None), slow
        assert "(the suite's --time-limit, 8 s)" in (slow.reason or ""), slow.reason
        assert add.status == "PASSED" and add.time_us, add


def test_a_time_limit_of_nothing_is_refused(tmp_path) -> None:
    from typer.testing import CliRunner

    from gpuarena.cli.app import app

    out = tmp_path / "s.json"
    ran = CliRunner().invoke(app, ["suite", "run", "--problems", "level1/add", "--time-limit", "0", "-o", str(out)])
    assert ran.exit_code != 0 and "--time-limit 0: give a number of seconds over 0" in ran.output
    assert not out.exists()
