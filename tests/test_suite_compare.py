"""Issue 48: `suite compare` refuses a comparison across devices or workload sets unless asked,
names every problem it does not score with the reason (the shipped baseline's own left-outs
too), and its interval spans the run-to-run spread when the results hold several runs (and says
it is within one run only when they do not); `suite run --runs N` and `suite merge` make them."""

from __future__ import annotations

import json
import math

import pytest
from tests.conftest import ROOT
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.errors import GpuarenaError
from gpuarena.harness.stats import weighted_geomean
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.runs import merge_runs
from gpuarena.suite.score import compare

Times = dict[str, tuple[float, float, float] | None]


def suite(
    times: Times,
    device: str = "cuda",
    device_name: str = "NVIDIA H200",
    workloads: dict[str, list[str]] | None = None,
    left_out: dict[str, str] | None = None,
) -> SuiteResult:
    """A result of one run: problem -> (time, low, high), None for one that failed."""
    workloads = workloads or {}
    return SuiteResult(
        framework="pytorch",
        device=device,
        device_name=device_name,
        environment={},
        command="test",
        left_out=left_out or {},
        problems=[
            ProblemTime(
                problem=name,
                level=int(name[5]),
                weight=1.0,
                status="PASSED" if t else "WRONG_VALUES",
                reason="" if t else "out0: 3 of 40 elements outside the tolerance",
                **(
                    {
                        "time_us": t[0],
                        "low_us": t[1],
                        "high_us": t[2],
                        "runs_us": [t[0]],
                        "workloads": {w: t[0] for w in workloads.get(name, ["small"])},
                    }
                    if t
                    else {}
                ),
            )
            for name, t in times.items()
        ],
    )


def cli(*args: str) -> tuple[int, str]:
    done = CliRunner().invoke(app, list(args))
    return done.exit_code, " ".join(done.output.split())


def test_a_comparison_across_devices_is_refused_unless_asked_and_says_what_differs(tmp_path) -> None:
    gpu = suite({"level1/a": (10, 9, 11), "level1/b": (20, 19, 21)})
    cpu = suite({"level1/a": (100, 90, 110), "level1/b": (200, 190, 210)}, device="cpu", device_name="AMD EPYC")
    with pytest.raises(GpuarenaError) as refused:
        compare(gpu, cpu)
    said = str(refused.value)
    assert "the baseline was timed on cuda (NVIDIA H200) and the result on cpu (AMD EPYC)" in said
    assert "--across-devices" in said
    assert math.isclose(compare(gpu, cpu, across_devices=True).score, 0.1)
    # one GPU model against another is across devices too
    h100 = gpu.model_copy(update={"device_name": "NVIDIA H100 80GB HBM3"})
    with pytest.raises(
        GpuarenaError, match=r"on cuda \(NVIDIA H200\) and the result on cuda \(NVIDIA H100 80GB HBM3\)"
    ):
        compare(gpu, h100)
    (tmp_path / "gpu.json").write_text(gpu.model_dump_json())
    (tmp_path / "cpu.json").write_text(cpu.model_dump_json())
    code, said = cli("suite", "compare", str(tmp_path / "gpu.json"), str(tmp_path / "cpu.json"))
    assert code == 2 and "not compared: the baseline was timed on cuda (NVIDIA H200)" in said
    assert "--across-devices scores it" in said
    code, said = cli("suite", "compare", str(tmp_path / "gpu.json"), str(tmp_path / "cpu.json"), "--across-devices")
    assert code == 0 and "score 0.100" in said


def test_a_comparison_across_workload_sets_is_refused_unless_asked_naming_the_problems() -> None:
    base = suite({"level1/a": (10, 9, 11), "level1/b": (20, 19, 21)}, workloads={"level1/a": ["small", "llama"]})
    other = suite({"level1/a": (5, 4, 6), "level1/b": (10, 9, 11)})
    with pytest.raises(GpuarenaError) as refused:
        compare(base, other)
    said = str(refused.value)
    assert "1 problem(s) were timed on other workloads (level1/a: baseline llama, small; result small)" in said
    assert "--across-workloads" in said and "level1/b" not in said and "across devices" not in said
    assert math.isclose(compare(base, other, across_workloads=True).score, 2.0)
    # both refusals at once, each with its own way out
    cpu = other.model_copy(update={"device": "cpu", "device_name": "AMD EPYC"})
    with pytest.raises(GpuarenaError, match="--across-devices scores it.*--across-workloads scores them"):
        compare(base, cpu)


def test_every_problem_not_scored_is_named_with_its_reason_in_the_table_and_the_json(tmp_path) -> None:
    base = suite(
        {
            "level1/a": (10, 9, 11),
            "level1/failed-here": None,
            "level1/failed-both": None,
            "level1/only-base": (1, 1, 1),
        },
        left_out={"level1/sort": "its reference became a stable sort after this run"},
    )
    other = suite(
        {
            "level1/a": (5, 4, 6),
            "level1/failed-here": (3, 2, 4),
            "level1/failed-both": None,
            "level1/sort": (2, 1, 3),
            "level1/new": (2, 1, 3),
        },
        left_out={"level1/only-base": "no cuda workload"},
    )
    c = compare(base, other)
    assert c.covered == 1
    assert c.left_out == {
        "level1/failed-both": "failed in both: baseline WRONG_VALUES (out0: 3 of 40 elements outside the tolerance); "
        "result WRONG_VALUES (out0: 3 of 40 elements outside the tolerance)",
        "level1/failed-here": "failed in the baseline: WRONG_VALUES (out0: 3 of 40 elements outside the tolerance)",
        "level1/new": "not in the baseline",
        "level1/only-base": "not in the result: no cuda workload",
        "level1/sort": "not in the baseline: its reference became a stable sort after this run",
    }
    assert c.left_out_counts == {
        "failed in both": 1,
        "failed in the baseline": 1,
        "not in the baseline": 2,
        "not in the result": 1,
    }
    (tmp_path / "base.json").write_text(base.model_dump_json())
    (tmp_path / "other.json").write_text(other.model_dump_json())
    code, said = cli("suite", "compare", str(tmp_path / "base.json"), str(tmp_path / "other.json"))
    assert code == 0, said
    assert "5 problems not scored" in said and "its reference became a stable sort after this run" in said
    assert "left out: 1 failed in both, 1 failed in the baseline, 2 not in the baseline, 1 not in the result" in said
    done = CliRunner().invoke(
        app, ["suite", "compare", str(tmp_path / "base.json"), str(tmp_path / "other.json"), "--json"]
    )
    shown = json.loads(done.stdout)
    assert shown["left_out"] == c.left_out and shown["left_out_counts"]["not in the baseline"] == 2


def test_runs_merge_into_one_result_whose_interval_spans_them() -> None:
    first = suite({"level1/a": (100, 98, 102), "level1/b": (50, 49, 51), "level1/c": (10, 9, 11)})
    second = suite({"level1/a": (110, 108, 112), "level1/b": (46, 45, 47), "level1/c": None})
    merged = merge_runs([first, second])
    assert merged.runs == 2
    a, b, c = merged.problems
    assert a.runs_us == [100, 110] and math.isclose(a.time_us, math.sqrt(100 * 110))
    assert (a.low_us, a.high_us) == (98, 112) and (b.low_us, b.high_us) == (45, 51)
    assert math.isclose(a.workloads["small"], math.sqrt(100 * 110))
    # a problem that failed in one run is not timed, and says which run
    assert c.time_us is None and c.status == "WRONG_VALUES" and c.reason.startswith("run 2 of 2: WRONG_VALUES")
    assert merge_runs([first]) == first
    with pytest.raises(GpuarenaError, match="not runs of one thing"):
        merge_runs([first, first.model_copy(update={"device_name": "NVIDIA H100 80GB HBM3"})])


def test_the_interval_over_runs_covers_the_same_code_timed_twice() -> None:
    """The reviewer's case: the same code run twice scores below 1 with a one-run interval that
    leaves 1 out. With both runs on each side the interval spans the runs, the runs' scores are
    every pairing's (by hand), and a single-run comparison says its interval is within one run."""
    names = ["level1/a", "level1/b", "level1/c"]
    run1 = suite({n: (100, 99, 101) for n in names})
    run2 = suite({n: (107, 106, 108) for n in names})  # the whole run 7% slower: the machine, not the code
    once = compare(run1, run2)
    assert once.high < 1 and once.runs_low is None and once.baseline_runs == once.result_runs == 1
    assert once.spread.startswith("within one run only") and "--runs N" in once.spread
    both = merge_runs([run1, run2])
    twice = compare(both, both)
    assert math.isclose(twice.score, 1.0)
    pairings = [weighted_geomean([b / r] * 3, [1.0] * 3) for b in (100, 107) for r in (100, 107)]
    assert math.isclose(twice.runs_low, min(pairings)) and math.isclose(twice.runs_high, max(pairings))
    assert twice.low <= twice.runs_low < 1 < twice.runs_high <= twice.high
    assert twice.problems_low < 1 < twice.problems_high  # the draws pick a run of each side too
    assert twice.baseline_runs == twice.result_runs == 2 and twice.spread.startswith("over 2 run(s) of the baseline")


def test_suite_merge_writes_one_result_of_several_runs_and_compare_says_what_its_interval_covers(tmp_path) -> None:
    run1 = suite({"level1/a": (100, 99, 101), "level1/b": (50, 49, 51)})
    run2 = suite({"level1/a": (104, 103, 105), "level1/b": (49, 48, 50)})
    for name, r in (("r1", run1), ("r2", run2)):
        (tmp_path / f"{name}.json").write_text(r.model_dump_json())
    code, said = cli(
        "suite", "merge", str(tmp_path / "r1.json"), str(tmp_path / "r2.json"), "-o", str(tmp_path / "m.json")
    )
    assert code == 0 and "2 runs, 2 of 2 problems timed in every run" in said, said
    merged = SuiteResult.model_validate_json((tmp_path / "m.json").read_text())
    assert merged.runs == 2 and merged.problems[0].runs_us == [100, 104]
    code, said = cli("suite", "compare", str(tmp_path / "m.json"), str(tmp_path / "m.json"))
    assert code == 0 and "over the runs' scores" in said and "over 2 run(s) of the baseline and 2 of the result" in said
    code, said = cli("suite", "compare", str(tmp_path / "r1.json"), str(tmp_path / "r2.json"))
    assert code == 0 and "the interval: within one run only" in said


def test_the_shipped_baseline_is_picked_on_the_result_s_device_and_says_what_it_leaves_out() -> None:
    from gpuarena.cli.suite_cli import SHIPPED_BASELINES, shipped_baseline
    from gpuarena.suite.frameworks import implements
    from gpuarena.suite.run import all_problems, discover

    bundled = {p.id for p in discover()}
    dataset = {p.id for p in all_problems([ROOT / "dataset" / "problems"]) if implements(p, "pytorch")}
    assert shipped_baseline(dataset, "NVIDIA H200") == SHIPPED_BASELINES / "H200-pytorch-dataset.json"
    assert shipped_baseline(dataset, "NVIDIA H100 80GB HBM3") is None  # its dataset baseline was of the unmerged one
    assert shipped_baseline(bundled, "NVIDIA H200") is None  # the bundled problems' baseline is the H100's
    assert shipped_baseline(bundled, "AMD EPYC") is None
    # every shipped baseline names what it left out of the problems its framework has, with the reason
    for path in sorted(SHIPPED_BASELINES.glob("*.json")):
        shipped = SuiteResult.model_validate_json(path.read_text())
        assert all(why.strip() for why in shipped.left_out.values()), path.name
        assert not set(shipped.left_out) & {p.problem for p in shipped.problems}, path.name


@pytest.mark.harness
def test_suite_run_runs_twice_keeps_what_it_left_out_and_times_and_scores_a_sort(tmp_path) -> None:
    """The whole suite run twice on the CPU: each problem keeps both runs' times and an interval
    spanning them; a JAX problem the pytorch framework leaves out is kept in the file with the
    reason; and a sort (two integer outputs, values and stable indices) is timed and scored."""
    out = tmp_path / "s.json"
    sort, jax = "level1/sort-ab780ebe", "level1/jax-add-d8c2d718"
    code, said = cli(
        "suite", "run", "--device", "cpu", "--root", str(ROOT / "dataset" / "problems"),
        "--problems", sort, "--problems", jax, "--runs", "2", "--budget", "0.1", "-o", str(out),
    )  # fmt: skip
    assert code == 0, said
    assert f"[run 2/2] [2/2] {sort}:" in said
    result = SuiteResult.model_validate_json(out.read_text())
    assert result.runs == 2 and [p.problem for p in result.problems] == [sort]
    assert result.left_out == {jax: "its reference is written in jax, no pytorch implementation"}
    timed = result.problems[0]
    assert timed.status == "PASSED" and len(timed.runs_us) == 2, timed
    assert timed.low_us <= min(timed.runs_us) <= max(timed.runs_us) <= timed.high_us
    c = compare(result, result)
    assert [r.problem for r in c.ratios] == [sort] and c.runs_low is not None and c.result_runs == 2


def test_a_run_keeps_the_problems_it_leaves_out_with_the_reason() -> None:
    """What run_suite and run_sharded record in the result's left_out: a problem with no workload
    on the device, and one whose reference is another framework's."""
    import dataclasses

    from gpuarena.problems import load_problem
    from gpuarena.suite.run import left_out_of

    problems = ROOT / "dataset" / "problems"
    sort = load_problem(problems / "level1" / "sort-ab780ebe", root=problems)
    jax = load_problem(problems / "level1" / "jax-add-d8c2d718", root=problems)
    gpu_only = dataclasses.replace(
        sort,
        id="level1/gpu-only",
        spec=sort.spec.model_copy(
            update={"workloads": [w.model_copy(update={"devices": ["cuda"]}) for w in sort.spec.workloads]}
        ),
    )
    assert left_out_of([sort, jax, gpu_only], "pytorch", "cpu") == {
        "level1/jax-add-d8c2d718": "its reference is written in jax, no pytorch implementation",
        "level1/gpu-only": "no cpu workload",
    }
    assert left_out_of([sort, gpu_only], "pytorch", "cuda") == {}


def test_the_sort_is_scored_against_the_shipped_h200_baseline() -> None:
    """Issue 48: the sort problems were never scored (cut from the shipped baseline). The merged
    dataset holds the four harvests' sorts as one problem, and an H200 eager result of it (the
    baseline's own run, restamped) scores it on every model's shape."""
    from gpuarena.cli.suite_cli import SHIPPED_BASELINES

    baseline = SuiteResult.model_validate_json((SHIPPED_BASELINES / "H200-pytorch-dataset.json").read_text())
    again = SuiteResult.model_validate_json(
        (ROOT / "bench" / "results" / "suite-dataset-pytorch-NVIDIA-H200-2026-12-01-stop69-as-timed.json").read_text()
    )
    from gpuarena.problems import load_problem
    from gpuarena.suite.restamp import restamped

    problems = ROOT / "dataset" / "problems"
    sorts = [p for p in again.problems if p.problem.startswith("level1/sort-")]
    sort = load_problem(problems / "level1" / "sort-ab780ebe", root=problems)
    c = compare(baseline, restamped(again.model_copy(update={"problems": sorts}), {sort.id: sort}))
    assert [(r.problem, r.ratio) for r in c.ratios] == [("level1/sort-ab780ebe", pytest.approx(1.0))]
    assert not any(name.startswith("level1/sort-") for name in c.left_out)


def test_a_run_that_learnt_no_device_name_merges_with_runs_on_its_device() -> None:
    """A run (or a run so far, as `suite run --runs N` writes after each problem) whose problems
    all failed before a record named the device carries only its device: it merges with the
    named runs on that device, not with another device's."""
    named = suite({"level1/a": (10, 9, 11)})
    unnamed = suite({"level1/a": None}, device_name="cuda")
    merged = merge_runs([unnamed, named])
    assert merged.device_name == "NVIDIA H200" and merged.runs == 2 and merged.problems[0].time_us is None
    with pytest.raises(GpuarenaError, match="not runs of one thing"):
        merge_runs([named, suite({"level1/a": None}, device="cpu", device_name="cpu")])


def test_a_result_is_restamped_with_today_s_weights_and_workloads() -> None:
    """suite restamp: the time from the kept medians with the workloads' weights as the problem now
    gives them, only those it runs on the device (the CPU's `small` is not a GPU's), a joined
    name found under its part, the interval moved by the time's factor; a problem whose workload
    was not timed is left out with the reason, one no longer given too."""
    import dataclasses

    from gpuarena.problems import load_problem
    from gpuarena.suite.model import ProblemTime
    from gpuarena.suite.restamp import restamped

    problems = ROOT / "dataset" / "problems"
    sort = load_problem(problems / "level1" / "sort-ab780ebe", root=problems)
    shapes = [w for w in sort.spec.workloads if "cuda" in w.devices]
    weights = {w.name: w.weight for w in shapes}
    medians = {w.name: 10.0 * (k + 1) for k, w in enumerate(shapes)}
    timed = ProblemTime(
        problem=sort.id, level=1, weight=9.0, status="PASSED", time_us=20.0, low_us=19.0, high_us=22.0,
        workloads={**medians, "small": 0.5}, runs_us=[20.0],
    )  # fmt: skip
    joined = dataclasses.replace(
        sort,
        id="level1/joined",
        spec=sort.spec.model_copy(
            update={"workloads": [shapes[0].model_copy(update={"name": f"someone-prefill.{shapes[0].name}"})]}
        ),
    )
    untimed = dataclasses.replace(sort, id="level1/untimed")
    result = suite({}).model_copy(
        update={
            "device": "cuda",
            "problems": [
                timed,
                timed.model_copy(update={"problem": "level1/joined"}),
                timed.model_copy(update={"problem": "level1/untimed", "workloads": {"small": 0.5}}),
                timed.model_copy(update={"problem": "level1/gone"}),
            ],
        }
    )
    got = restamped(result, {p.id: p for p in (sort, joined, untimed)})
    (now, again) = got.problems
    expected = math.exp(sum(weights[n] * math.log(medians[n]) for n in medians) / sum(weights.values()))
    assert now.time_us == pytest.approx(expected) and now.weight == sort.spec.weight
    assert now.model_weights == sort.spec.model_weights and set(now.workloads) == set(medians)  # no `small`
    assert (now.low_us, now.high_us) == pytest.approx((19 * expected / 20, 22 * expected / 20))
    assert now.runs_us == pytest.approx([expected])
    assert again.problem == "level1/joined" and again.time_us == pytest.approx(medians[shapes[0].name])
    assert "were not all timed" in got.left_out["level1/untimed"] and "level1/gone" in got.left_out
    assert "restamped" in got.command
    assert restamped(got, {p.id: p for p in (sort, joined)}).command == got.command  # said once, however often


def test_problems_that_all_weigh_nothing_are_refused_a_whole_score_with_the_reason() -> None:
    """Since `dataset weigh`, an op whose every call a kept fusion holds weighs 0: a comparison of
    such problems alone has no whole score, and says why rather than dividing by zero."""
    weightless = suite({"level1/a": (10, 9, 11)})
    weightless.problems[0].weight = 0.0
    with pytest.raises(GpuarenaError, match="all weigh 0"):
        compare(weightless, weightless)


def test_parts_of_one_run_made_in_several_calls_join_into_one_result() -> None:
    """A suite cut into device calls (`suite run --skip-in`): the parts, each timing other
    problems, join in order; a problem in two parts, or parts of other frameworks or devices, are
    refused with the reason; what no part timed stays left out."""
    from gpuarena.suite.runs import join_parts

    one = suite({"level1/a": (10, 9, 11)}, left_out={"level1/c": "no cuda workload"})
    two = suite({"level1/b": (20, 19, 21), "level1/c": (5, 4, 6)})
    joined = join_parts([one, two])
    assert [p.problem for p in joined.problems] == ["level1/a", "level1/b", "level1/c"] and not joined.left_out
    with pytest.raises(GpuarenaError, match="level1/a is in parts 1 and 2"):
        join_parts([one, one])
    with pytest.raises(GpuarenaError, match="join parts of one suite run"):
        join_parts([one, two.model_copy(update={"framework": "torch-compile"})])
    with pytest.raises(GpuarenaError, match="join parts of one device's run"):
        join_parts([one, two.model_copy(update={"device_name": "NVIDIA H100 80GB HBM3"})])


def test_a_part_that_times_problems_again_replaces_their_earlier_times_when_asked() -> None:
    """After a harness fix (inputs that keep their layout) a few problems are timed again: with
    `retimed` the later part's times replace the earlier ones (in the later part's place);
    without it the overlap is refused; a part that lists a problem twice is refused either way."""
    from gpuarena.suite.runs import join_parts

    old = suite({"level1/a": (10, 9, 11), "level1/b": (20, 19, 21), "level1/c": (5, 4, 6)})
    again = suite({"level1/b": (80, 79, 81)})
    joined = join_parts([old, again], retimed=True)
    assert [(p.problem, p.time_us) for p in joined.problems] == [("level1/a", 10), ("level1/c", 5), ("level1/b", 80)]
    with pytest.raises(GpuarenaError, match="--retimed"):
        join_parts([old, again])
    twice = again.model_copy(update={"problems": again.problems * 2})
    with pytest.raises(GpuarenaError, match="is in parts 2 and 2"):
        join_parts([old, twice], retimed=True)


@pytest.mark.harness
def test_suite_run_skips_what_an_earlier_part_timed_and_the_parts_join(tmp_path) -> None:
    first, rest, joined = tmp_path / "first.json", tmp_path / "rest.json", tmp_path / "joined.json"
    chosen = ["--problems", "level1/add", "--problems", "level1/gelu"]
    code, said = cli("suite", "run", "--device", "cpu", "--problems", "level1/add", "--budget", "0.1", "-o", str(first))
    assert code == 0, said
    code, said = cli(
        "suite", "run", "--device", "cpu", *chosen, "--skip-in", str(first), "--budget", "0.1", "-o", str(rest)
    )
    assert code == 0, said
    assert [p.problem for p in SuiteResult.model_validate_json(rest.read_text()).problems] == ["level1/gelu"]
    code, said = cli("suite", "join", str(first), str(rest), "-o", str(joined))
    assert code == 0 and "2 problems from 2 parts" in said, said
    assert [p.problem for p in SuiteResult.model_validate_json(joined.read_text()).problems] == [
        "level1/add",
        "level1/gelu",
    ]
