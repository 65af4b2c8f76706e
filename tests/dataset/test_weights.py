"""`gpuarena dataset weigh` (issue 48): each model-phase's op calls counted once, claimed by the
outermost kept problem; each model-phase's weights sum to 1 and so do the dataset's; a level is
a view of the model at its granularity; suite times replace the harvest's and a >2x difference
is reported; merged and published-config problems are weighed; --write writes and nothing else
does; the suite's per-level and per-model scores use the new weights.

The harvest is a real recording (dataset/record.py) of a tiny model, grouped by the harvester's
own functions, with each op's seconds set by hand so that the expected weights are exact:

    forward: relu(x * 3) -> stage(a, b) -> relu(h * 3)     stage, a and b: level-3 fusions
    block:   relu(linear(x)) * 2                            (t: metadata, addmm, relu, mul)

A forward: mul*3 2 calls (2 ms each), relu 4 calls (1 ms; 2 of them inside the blocks), addmm 2
(4 ms), mul*2 2 (2 ms), t 2 (0.5 ms): a block is 7.5 ms, the stage 15 ms, the forward 21 ms."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset.assemble import Dataset, Entry, dump_problem_toml
from gpuarena.dataset.harvest import Harvest, fusion_calls, group_calls, group_modules
from gpuarena.dataset.merge import Fold, MergePlan
from gpuarena.dataset.merge import write as merge_write
from gpuarena.dataset.record import record
from gpuarena.dataset.recorded_layout import strided_share
from gpuarena.dataset.weights import weigh
from gpuarena.problems.model import ProblemSpec
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.score import compare

pytestmark = pytest.mark.quick

REPO = Path(__file__).resolve().parents[2]
MODEL = "tiny-net"
LABEL = "tiny-net-prefill"
REPEATS = 2
MS = {"aten.addmm.default": 4.0, "aten.relu.default": 1.0, "aten.mul.Tensor": 2.0, "aten.t.default": 0.5}


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) * 2.0


class Stage(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = Block(), Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage = Stage()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.stage(torch.relu(x * 3.0)) * 3.0)


def _harvest(folder: Path, device: str = "cuda", modules: bool = True) -> dict[str, str]:
    """The harvest folder (every group written) and its problems by role: mul3, relu, addmm, mul2,
    block, stage."""
    torch.manual_seed(0)
    net, x = Net(), torch.randn(4, 8)
    recorder = record(lambda: net(x), repeats=REPEATS, model=net)
    recorder.calls = [c.model_copy(update={"seconds": MS[c.op] / 1000}) for c in recorder.calls]
    groups = [g for g, _ in group_calls(recorder.calls, REPEATS)] + [g for g, _ in group_modules(recorder, REPEATS)]
    roles: dict[str, str] = {}
    for g in groups:
        role = {"module:Stage": "stage", "module:Block": "block", "aten.addmm.default": "addmm"}.get(g.op)
        if g.op == "aten.relu.default":
            role = "relu"
        elif g.op == "aten.mul.Tensor":
            role = "mul3" if "3.0" in g.signature else "mul2"
        if role:
            g.status, g.problem = "written", f"level{g.level}/{g.name}"
            roles[role] = g.problem
    folder.mkdir(parents=True)
    harvest = Harvest(
        command=f"gpuarena harvest {MODEL} -o {folder}",
        model=MODEL,
        phase="prefill",
        sizes={"batch": 4},
        device=device,
        seed=0,
        repeats=REPEATS,
        min_share=0.0,
        total_seconds=sum(c.seconds for c in recorder.calls),
        calls=len(recorder.calls) // REPEATS,
        written=len(roles),
        rejected=0,
        rejected_share=0.0,
        groups=groups,
    )
    (folder / "harvest.json").write_text(harvest.model_dump_json(indent=2))
    (folder / "profile.jsonl").write_text("".join(c.model_dump_json() + "\n" for c in recorder.calls))
    if modules:
        (folder / "modules.jsonl").write_text("".join(m.model_dump_json() + "\n" for m in fusion_calls(recorder)))
    assert set(roles) == {"mul3", "relu", "addmm", "mul2", "block", "stage"}
    return roles


def _problem(
    root: Path, problem: str, workloads: list[str], tags: list[str] | None = None, weight: float = 0.5
) -> None:
    folder = root / problem
    folder.mkdir(parents=True)
    spec: dict[str, Any] = {
        "name": problem.split("/")[1],
        "level": int(problem.split("/")[0].removeprefix("level")),
        "summary": "a problem",
        "tags": tags if tags is not None else ["op", "harvested", MODEL, "prefill"],
        "weight": weight,
        "provenance": {"framework": "pytorch", "operator": "op", "models": []},
        "workloads": [
            *({"name": w, "axes": {"n": 4 + k}, "dtype": "float32", "weight": 1.0, "devices": ["cuda"]}
              for k, w in enumerate(workloads)),
            {"name": "small", "axes": {"n": 2}, "dtype": "float32", "weight": 1.0, "devices": ["cpu"]},
        ],
    }  # fmt: skip
    (folder / "problem.toml").write_text(dump_problem_toml(spec))


def _root(root: Path, problems: list[str], entries: list[Entry] | None = None) -> Path:
    for problem in problems:
        _problem(root, problem, [LABEL])
    entries = entries or [Entry(problem=p, status="kept", weight=0.5, harvests=[f"{MODEL} prefill"]) for p in problems]
    index = Dataset(harvests=["h"], kept=len(entries), left_out=0, left_out_share=0.0, entries=entries)
    (root / "dataset.json").write_text(index.model_dump_json(indent=2))
    return root


def _suite(times: dict[str, dict[str, float]], framework: str = "pytorch") -> SuiteResult:
    problems = [
        ProblemTime(problem=p, level=int(p[5]), weight=1.0, status="PASSED", time_us=1.0, workloads=w)
        for p, w in times.items()
    ]
    return SuiteResult(
        framework=framework, device="cuda", device_name="H", environment={}, command="c", problems=problems
    )


def _by_problem(report: Any) -> dict[str, Any]:
    return {p.problem: p for p in report.problems}


def test_an_op_inside_a_kept_fusion_claims_nothing_there_but_keeps_its_level_weight(tmp_path):
    """The blocks are kept, the stage not: a block claims its calls (addmm, the mul by 2, half the
    relus), the ops keep only what lies outside every kept fusion, and each model-phase's weights
    sum to 1. Among level 1 alone, each op claims all its calls."""
    roles = _harvest(tmp_path / "h")
    kept = [roles[r] for r in ("mul3", "relu", "addmm", "mul2", "block")]
    report = weigh(_root(tmp_path / "root", kept), [tmp_path / "h"])
    got = _by_problem(report)
    (model,) = report.models
    assert model.label == LABEL and model.weight_sum == pytest.approx(1.0)
    assert model.covered == pytest.approx(1.0) and model.claimed_us == pytest.approx(21000)
    # a forward: blocks 2 x 7.5 ms, the relus outside 2 x 1, the mul by 3 2 x 2: 21 ms
    assert got[roles["block"]].weight == pytest.approx(15 / 21)
    assert got[roles["relu"]].weight == pytest.approx(2 / 21)  # half its calls are inside the blocks
    assert got[roles["mul3"]].weight == pytest.approx(4 / 21)
    assert got[roles["addmm"]].weight == 0 and got[roles["mul2"]].weight == 0
    assert report.weight_sum == pytest.approx(1.0)
    # level 1 alone: mul*3 4 ms, relu 4, addmm 8, mul*2 4
    assert got[roles["relu"]].level_weight == pytest.approx(4 / 20)
    assert got[roles["addmm"]].level_weight == pytest.approx(8 / 20)
    assert got[roles["block"]].level_weight == pytest.approx(1.0)
    assert report.level_sums == pytest.approx({1: 1.0, 3: 1.0})
    assert got[roles["addmm"]].model_weights == {LABEL: 0.0}
    # a workload weighs the model time its shapes stand for: all four relus, not the two claimed
    assert got[roles["relu"]].workloads == {LABEL: pytest.approx(4 / 21)}
    assert got[roles["addmm"]].workloads == {LABEL: pytest.approx(8 / 21)}
    assert not report.unclaimed and not report.disagreements and model.harvest_timed == 6 - 1


def test_the_outermost_kept_fusion_claims_and_a_level_is_a_view_at_its_granularity(tmp_path):
    """With the stage kept too, it claims the blocks' calls, in the dataset and among level 3."""
    roles = _harvest(tmp_path / "h")
    report = weigh(_root(tmp_path / "root", list(roles.values())), [tmp_path / "h"])
    got = _by_problem(report)
    assert got[roles["stage"]].weight == pytest.approx(15 / 21) and got[roles["block"]].weight == 0
    assert got[roles["stage"]].level_weight == pytest.approx(1.0) and got[roles["block"]].level_weight == 0
    assert got[roles["relu"]].weight == pytest.approx(2 / 21) and got[roles["relu"]].level_weight == pytest.approx(0.2)
    assert report.weight_sum == pytest.approx(1.0)


def test_a_harvest_without_module_calls_finds_its_fusions_as_runs_of_one_sequence(tmp_path):
    """A JAX harvest keeps no modules.jsonl: a fusion's calls are found as runs of the sequence of
    calls its first call starts, adding up to its seconds; the weights are the same."""
    roles = _harvest(tmp_path / "h", modules=False)
    kept = [roles[r] for r in ("mul3", "relu", "addmm", "mul2", "block")]
    report = weigh(_root(tmp_path / "root", kept), [tmp_path / "h"])
    got = _by_problem(report)
    assert got[roles["block"]].weight == pytest.approx(15 / 21) and got[roles["addmm"]].weight == 0
    assert got[roles["relu"]].weight == pytest.approx(2 / 21) and not report.models[0].notes


def test_suite_times_replace_the_harvest_s_and_a_twofold_difference_is_listed(tmp_path):
    """The suite's median for the workload holding a group's shapes is its time; the relu timed at
    a tenth of its recorded millisecond is listed (a GPU harvest), not shipped silently; its
    inputs were contiguous, so the suite's time stands (a strided op's would not: below)."""
    roles = _harvest(tmp_path / "h")
    kept = [roles[r] for r in ("mul3", "relu", "addmm", "mul2", "block")]
    root = _root(tmp_path / "root", kept)
    suite = _suite({roles["relu"]: {LABEL: 100.0, "small": 1.0}, roles["block"]: {LABEL: 7000.0}})
    report = weigh(root, [tmp_path / "h"], [suite])
    got = _by_problem(report)
    total = 2 * 7000 + 2 * 100 + 2 * 2000
    assert got[roles["relu"]].weight == pytest.approx(200 / total)
    assert got[roles["block"]].weight == pytest.approx(14000 / total)
    assert report.models[0].harvest_timed == 3  # mul3, addmm, mul2: their own seconds
    (slow,) = report.disagreements
    assert (slow.problem, slow.calls) == (roles["relu"], 4)
    assert (slow.recorded_us, slow.timed_us) == (pytest.approx(1000), 100) and slow.ratio == pytest.approx(0.1)
    claim = next(c for c in report.models[0].claims if c.problem == roles["relu"])
    assert (claim.source, claim.us_per_call, claim.recorded_us_per_call) == ("suite", 100, pytest.approx(1000))
    # the same relu recorded on a transposed input: the suite timed a contiguous copy, the harvest's time stands
    harvest = json.loads((tmp_path / "h" / "harvest.json").read_text())
    for group in harvest["groups"]:
        if group["problem"] == roles["relu"]:
            group["signature"] = json.dumps(["aten.relu.default", [["self", [[64, 32], "float32", [1, 64]]]]])
    (tmp_path / "h" / "harvest.json").write_text(json.dumps(harvest))
    strided = weigh(root, [tmp_path / "h"], [suite])
    claim = next(c for c in strided.models[0].claims if c.problem == roles["relu"])
    assert claim.source.startswith("harvest") and claim.us_per_call == pytest.approx(1000)
    assert len(strided.disagreements) == 1
    # a CPU recording is not a GPU's time: nothing to disagree with
    _harvest(tmp_path / "cpu", device="cpu")
    assert not weigh(root, [tmp_path / "cpu"], [suite]).disagreements


def test_a_merged_problem_stands_for_what_was_folded_into_it(tmp_path):
    """`dataset merge` records what it folded (transitively); weigh maps a harvest's problem id to
    the problem holding it, and the joined workload name to the label."""
    plain = tmp_path / "plain"
    _root(plain, ["level1/a", "level1/b"], [
        Entry(problem="level1/a", status="kept", weight=0.1, harvests=["x"], merged=["level1/older"]),
        Entry(problem="level1/b", status="kept", weight=0.2, harvests=["y"]),
    ])  # fmt: skip
    merge_write(plain, tmp_path / "merged", MergePlan(problems=2, after=1, folds=[Fold(problem="level1/b", members=["level1/a"], exact=True)]), {})  # fmt: skip
    index = Dataset.model_validate_json((tmp_path / "merged" / "dataset.json").read_text())
    assert [(e.problem, e.merged) for e in index.entries] == [("level1/b", ["level1/a", "level1/older"])]

    roles = _harvest(tmp_path / "h")
    kept = [roles[r] for r in ("relu", "addmm", "mul2", "block")]
    root = _root(tmp_path / "root", kept)
    _problem(root, "level1/mul-merged", ["other-prefill", f"llama-prefill.{LABEL}"])
    index = Dataset.model_validate_json((root / "dataset.json").read_text())
    index.entries.append(
        Entry(problem="level1/mul-merged", status="kept", weight=1.0, harvests=[], merged=[roles["mul3"]])
    )
    (root / "dataset.json").write_text(index.model_dump_json())
    got = _by_problem(weigh(root, [tmp_path / "h"]))["level1/mul-merged"]
    assert got.weight == pytest.approx(4 / 21) and got.model_weights == {LABEL: pytest.approx(4 / 21)}
    assert got.workloads == {f"llama-prefill.{LABEL}": pytest.approx(4 / 21)}  # other-prefill: no harvest given
    # a suite run from before the merge timed the shape under its own problem and label
    recorded = next(
        c for c in weigh(root, [tmp_path / "h"]).models[0].claims if c.problem == "level1/mul-merged"
    ).recorded_us_per_call
    before = _suite({roles["mul3"]: {LABEL: 0.9 * recorded}})  # within DISAGREE: the suite's is used
    claim = next(
        c for c in weigh(root, [tmp_path / "h"], [before]).models[0].claims if c.problem == "level1/mul-merged"
    )
    assert (claim.source, claim.workload) == ("suite", f"llama-prefill.{LABEL}")
    assert claim.us_per_call == pytest.approx(0.9 * recorded)


def test_a_shipped_harvest_s_fusions_are_found_by_their_graphs():
    """On a real harvest (Llama-2-7B prefill on an H200, its own written problems as the dataset),
    every fusion's module calls are found, each level's weights sum to 1, and the decoder layer
    claims the ops inside it: what is left is the LM head and the final norm's residual."""
    folder = REPO / "dataset" / "harvests" / "llama-2-7b-prefill"
    report = weigh(folder, [folder])
    (model,) = report.models
    assert not model.notes and model.weight_sum == pytest.approx(1.0) and 0.99 < model.covered <= 1.0
    assert report.level_sums == pytest.approx({1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})
    heaviest, *rest = report.problems
    assert heaviest.problem.startswith("level4/llamadecoderlayer") and heaviest.weight > 0.98
    assert {p.problem.split("-")[0] for p in rest if p.weight > 0} == {"level1/mm", "level2/llamarmsnorm_residual"}
    assert all(p.level_weight > 0 for p in report.problems if p.level == 1)  # the ops claim their own calls
    attention = next(p for p in report.problems if p.problem.startswith("level4/llamaattention"))
    assert attention.level_weight == 0  # within level 4, the layer holding it claims it


def test_published_config_problems_are_weighed_by_level_within_their_config(tmp_path):
    """A config's problems share its time per level (suite times where all have one), its levels
    share its weight, and the configs together count as one model-phase (a config of one fusion
    does not weigh a whole model); a problem nothing names weighs 0."""
    roles = _harvest(tmp_path / "h")
    harvested = [roles[r] for r in ("mul3", "relu", "addmm", "mul2", "block")]
    config = [
        "level3/layer-foo-attention",
        "level3/layer-foo-ffn",
        "level4/layer-foo-decoder",
        "level2/fusion-foo-silu",
    ]
    other = "level2/fusion-bar-softcap"
    entries = [Entry(problem=p, status="kept", weight=0.5, harvests=["h"]) for p in harvested]
    entries += [Entry(problem=p, status="kept", weight=0.1, harvests=["published config Foo 7B"]) for p in config]
    entries += [Entry(problem=other, status="kept", weight=0.1, harvests=["published config Bar 13B"])]
    root = _root(tmp_path / "root", harvested, entries)
    for problem in config:
        _problem(root, problem, ["foo-prefill-1x2048"], tags=["layer", "published-config", "foo"], weight=0.1)
    _problem(root, other, ["bar-prefill-1x4096"], tags=["fusion", "published-config", "bar"], weight=0.1)
    _problem(root, "level1/lonely", ["other-prefill"])
    suite = _suite({config[0]: {"foo-prefill-1x2048": 30.0}, config[1]: {"foo-prefill-1x2048": 10.0}})
    report = weigh(root, [tmp_path / "h"], [suite])
    got = _by_problem(report)
    assert [m.label for m in report.models] == [LABEL, "config-bar-13b", "config-foo-7b"]
    assert report.models[2].weight_sum == pytest.approx(1.0)
    # within Foo: level 3 by time (0.75, 0.25), each of its 3 levels a third; the two configs are half
    # a model-phase each, beside the harvest's whole one
    assert got[config[0]].weight == pytest.approx(0.75 / 3 / 2 / 2)
    assert got[config[1]].weight == pytest.approx(0.25 / 3 / 2 / 2)
    assert got[config[2]].weight == pytest.approx(1 / 3 / 2 / 2) and got[config[3]].weight == pytest.approx(1 / 12)
    assert got[other].weight == pytest.approx(1 / 2 / 2)  # Bar's one fusion: Bar's half, not a model's whole
    assert got[roles["block"]].weight == pytest.approx(15 / 21 / 2)
    # level 3 is seen by the harvest (1) and Foo (1/2); level 2 by the two configs alone, level 4 by Foo
    assert got[config[0]].level_weight == pytest.approx(0.75 * 0.5 / 1.5)
    assert got[roles["block"]].level_weight == pytest.approx(1 / 1.5)
    assert got[config[3]].level_weight == pytest.approx(0.5) and got[other].level_weight == pytest.approx(0.5)
    assert got[config[2]].level_weight == pytest.approx(1.0)
    assert report.weight_sum == pytest.approx(1.0) and report.level_sums == pytest.approx({1: 1, 2: 1, 3: 1, 4: 1})
    assert report.unclaimed == ["level1/lonely"] and got["level1/lonely"].weight == 0
    assert got[config[0]].workloads == {}  # it stands for no harvest: its workloads keep their weights


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_write_changes_problem_toml_and_dataset_json_and_without_it_nothing_changes(tmp_path):
    roles = _harvest(tmp_path / "h")
    kept = [roles[r] for r in ("mul3", "relu", "addmm", "mul2", "block")]
    root = _root(tmp_path / "root", kept)
    before = _files(root)
    cli = CliRunner()
    shown = cli.invoke(
        app, ["dataset", "weigh", str(root), "--harvests", str(tmp_path / "h"), "--json", str(tmp_path / "r.json")]
    )
    assert shown.exit_code == 0, shown.output
    assert _files(root) == before and "nothing written" in shown.output and LABEL in shown.output
    assert json.loads((tmp_path / "r.json").read_text())["weight_sum"] == pytest.approx(1.0)

    done = cli.invoke(app, ["dataset", "weigh", str(root), "--harvests", str(tmp_path / "h"), "--write"])
    assert done.exit_code == 0, done.output
    relu = tomllib.loads((root / roles["relu"] / "problem.toml").read_text())
    spec = ProblemSpec.model_validate(relu)
    assert spec.weight == pytest.approx(2 / 21, rel=1e-5) and spec.level_weight == pytest.approx(0.2)
    assert spec.model_weights == {LABEL: pytest.approx(2 / 21, rel=1e-5)}
    assert {w.name: w.weight for w in spec.workloads} == {LABEL: pytest.approx(4 / 21, rel=1e-5), "small": 1.0}
    assert list(relu)[:6] == ["name", "level", "summary", "tags", "weight", "level_weight"]  # the format stays
    addmm = ProblemSpec.model_validate(tomllib.loads((root / roles["addmm"] / "problem.toml").read_text()))
    assert addmm.weight == 0 and addmm.level_weight == pytest.approx(0.4)
    index = {e.problem: e.weight for e in Dataset.model_validate_json((root / "dataset.json").read_text()).entries}
    assert index[roles["block"]] == pytest.approx(15 / 21, rel=1e-5) and index[roles["addmm"]] == 0
    again = _files(root)
    assert cli.invoke(app, ["dataset", "weigh", str(root), "--harvests", str(tmp_path / "h"), "--write"]).exit_code == 0
    assert _files(root) == again  # weighing again writes the same


def _timed(problem: str, level: int, ratio: float, **weights: Any) -> tuple[ProblemTime, ProblemTime]:
    tags = ["op", "harvested", "m", "prefill", "decode"]
    one = dict(problem=problem, level=level, tags=tags, status="PASSED", workloads={"w": 1.0}, **weights)
    base = ProblemTime(time_us=ratio, low_us=ratio, high_us=ratio, runs_us=[ratio], **one)
    return base, ProblemTime(time_us=1.0, low_us=1.0, high_us=1.0, runs_us=[1.0], **one)


def _compare(*pairs: tuple[ProblemTime, ProblemTime]) -> Any:
    def result(times: list[ProblemTime]) -> SuiteResult:
        return SuiteResult(framework="f", device="cuda", device_name="H", environment={}, command="c", problems=times)

    return compare(result([b for b, _ in pairs]), result([r for _, r in pairs]))


def test_compare_scores_levels_by_level_weight_and_models_by_model_weights(tmp_path):
    """by_level weighs with level_weight where every problem of the level has one; by_model with
    the shares of the model's phases (tags hold the slug, labels `<slug>-<phase>`); the overall
    score keeps `weight`; without the new weights (an old result file) both use weight."""
    a = _timed("level1/a", 1, 2.0, weight=1.0, level_weight=0.9, model_weights={"m-prefill": 0.1, "m-decode": 0.2})
    b = _timed("level1/b", 1, 0.5, weight=1.0, level_weight=0.1, model_weights={"m-prefill": 0.7})
    scored = _compare(a, b)
    assert scored.score == pytest.approx(1.0)
    assert scored.by_level[1] == pytest.approx(2**0.8)
    assert scored.by_model["m"] == pytest.approx(2 ** ((0.3 - 0.7) / 1.0))
    old = ProblemTime.model_validate({"problem": "level1/b", "level": 1, "weight": 1.0, "status": "PASSED"})
    assert old.level_weight is None and old.model_weights == {}
    c = _timed("level1/b", 1, 0.5, weight=1.0)
    unweighed = _compare(a, c)
    assert unweighed.by_level[1] == pytest.approx(1.0) and unweighed.by_model["m"] == pytest.approx(1.0)


def test_the_share_of_an_op_s_input_bytes_the_model_passed_strided():
    """From the recorded signatures of the shipped harvests (issue 48's disagreements): SegFormer's
    channels_last upsample is all strided, the decode KV-cache cat almost none (only its one new
    token is a slice), Llama's residual add half."""
    upsample = '["aten.upsample_bilinear2d.default", [["self", [[64, 256, 7, 7], "bfloat16", [12544, 1, 1792, 256]]], ["output_size", "ints", [56, 56]], ["align_corners", "bool", false]]]'
    cat = '["aten.cat.default", [["tensors", [[[16, 32, 2048, 128], "bfloat16", [8388608, 262144, 128, 1]], [[16, 32, 1, 128], "bfloat16", [12288, 128, 12288, 1]]]], ["dim", "int", 2]]]'
    add = '["aten.add.Tensor", [["self", [[1, 32, 2048, 128], "bfloat16", [8388608, 128, 4096, 1]]], ["other", [[1, 32, 2048, 128], "bfloat16", [8388608, 262144, 128, 1]]]]]'
    assert strided_share(upsample) == 1.0
    assert strided_share(cat) == pytest.approx(1 / 2049)
    assert strided_share(add) == 0.5
    assert strided_share("4ecc596e903f34a4") == 0.0  # a module's signature is a hash
    assert strided_share('["aten.relu.default", [["self", [[8, 1, 4], "float32", [4, 99, 1]]]]]') == 0.0
