"""`gpuarena dataset add`: harvests become dataset problems with a CPU workload, the same op on the
same arguments from several harvests is one problem whose weight adds up, a problem that fails
`gpuarena check` is left out with its reasons, and the shipped dataset itself passes check."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset import traffic
from gpuarena.dataset.assemble import Dataset, add, dump_problem_toml, model_slug, retried
from gpuarena.dataset.harvest import harvest
from gpuarena.dataset.models import build
from gpuarena.dataset.small_workload import shrink
from gpuarena.errors import GpuarenaError
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "dataset" / "problems"
TINY = "llama:dim=32,layers=1,heads=2,vocab=64,ffn=64"


def test_small_workloads_keep_sizes_equal_distinct_and_in_order():
    axes = {"x_0": 2048, "x_1": 4096, "mat2_0": 4096, "mat2_1": 14336, "b": 16}
    small = shrink(axes)
    assert small == {"x_0": 40, "x_1": 48, "mat2_0": 48, "mat2_1": 56, "b": 16}
    assert model_slug("hf:Qwen2MoeForCausalLM:size=full") == "qwen2moe"
    assert model_slug("hf:MixtralForCausalLM:size=full,num_hidden_layers=8") == "mixtral"
    assert model_slug("hf:GPT2LMHeadModel:size=full") == "gpt2"
    assert model_slug("llama:dim=4096,layers=32,heads=32") == "llama-d4096-l32"


def test_problem_toml_is_written_back_as_it_was_read():
    text = (REPO / "problems" / "level1" / "softmax" / "problem.toml").read_text()
    spec = tomllib.loads(text)
    assert tomllib.loads(dump_problem_toml(spec)) == spec


def _harvest(tmp_path: Path, name: str, seed: int, device: str = "cpu") -> Path:
    """A tiny model's harvest with every op written, whatever its share of the time: which ops
    pass a floor of shares is the busy CPU's timing, and these tests are about assembly."""
    out = tmp_path / name
    workload = build(TINY, "prefill", batch=1, seq=8, context=0, seed=seed)
    harvest(
        workload.forward,
        out,
        model=TINY,
        phase="prefill",
        sizes=workload.sizes,
        command=f"gpuarena harvest {TINY} --seed {seed} -o {out}",
        seed=seed,
        min_share=0.0,
        against=[],
    )
    if device != "cpu":  # as a GPU harvest writes it: its recorded shapes run on the GPU only
        report = json.loads((out / "harvest.json").read_text())
        (out / "harvest.json").write_text(json.dumps({**report, "device": device}))
    return out


def test_harvests_merge_into_checked_weighted_problems(tmp_path):
    first, second = _harvest(tmp_path, "a", seed=0, device="cuda"), _harvest(tmp_path, "b", seed=1)
    written = {
        g["problem"]: g["share"]
        for g in json.loads((first / "harvest.json").read_text())["groups"]
        if g["status"] == "written"
    }
    # one candidate broken on purpose: check must leave it out and say why. Without the profile,
    # the harvest's own references are taken as written (with it, they are written anew)
    (first / "profile.jsonl").unlink()
    broken = sorted(written)[0]
    (first / broken / "reference.py").write_text(
        "def reference(x):\n    return x * 0\n\n"
        + (first / broken / "reference.py").read_text().split("def reference", 1)[0]
    )
    root = tmp_path / "dataset"
    result = add([first], root)
    assert isinstance(result, Dataset) and result.kept + result.left_out == len(written)
    out = next(e for e in result.entries if e.problem == broken)
    assert out.status == "left-out" and out.reasons and not (root / broken).exists()
    # a problem both harvests kept
    shares = {
        g["problem"]: g["share"]
        for g in json.loads((second / "harvest.json").read_text())["groups"]
        if g["status"] == "written"
    }
    kept = next(e for e in result.entries if e.status == "kept" and e.problem in shares)
    problem = load_problem(root / kept.problem)
    names = [w.name for w in problem.spec.workloads]
    assert names == [f"{model_slug(TINY)}-prefill", "small"]  # the GPU's shapes, and the CPU's
    assert problem.spec.workloads[0].devices == ["cuda"] and "cpu" in problem.spec.workloads[1].devices
    assert problem.spec.weight == pytest.approx(written[kept.problem], rel=1e-4)
    assert "harvested" in problem.spec.tags and problem.spec.provenance.models
    assert problem.spec.bytes and problem.spec.flops  # derived over the workloads as written
    assert all(problem.spec.cost(w) == traffic.concrete(problem, w)[:2] for w in problem.spec.workloads)

    # the second harvest finds the same ops on the same arguments: weights add, one workload each
    again = add([second, first], root)  # first again: skipped, its shares are in already
    assert len(again.harvests) == 2
    merged = next(e for e in again.entries if e.problem == kept.problem)
    assert merged.harvests == [f"{model_slug(TINY)} prefill"]
    assert load_problem(root / kept.problem).spec.weight == pytest.approx(
        written[kept.problem] + shares[kept.problem], rel=1e-4
    )
    assert check_problem(root / kept.problem).ok


def test_recheck_leaves_out_what_fails_on_a_device_and_says_so(tmp_path):
    """`gpuarena dataset recheck ROOT --device D` checks every kept problem on D: one that passes
    stays, one that fails there is left out with the device in its reasons and its folder
    removed, and dataset.json counts it."""
    root = tmp_path / "dataset"
    # every op kept, whatever its share: which ops pass the 2% floor is the busy CPU's timing
    made = add([_harvest(tmp_path, "a", seed=0)], root)
    kept = [e.problem for e in made.entries if e.status == "kept"]
    assert len(kept) >= 2
    broken = kept[0]
    source = (root / broken / "reference.py").read_text()  # now returns zeros of the right shape
    params = source.split("def reference(", 1)[1].split(")", 1)[0]
    (root / broken / "reference.py").write_text(
        source.replace("def reference(", "def _recorded(", 1) + f"\n\ndef reference({params}):\n"
        f"    return _recorded({params}) * 0\n"
    )
    result = CliRunner().invoke(app, ["dataset", "recheck", str(root), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    # an output made all zeros is constant, whatever its dtype ("smaller than atol", the other
    # finding, only reads floating outputs: which op comes first is the busy CPU's timing)
    assert f"left out {broken}: on cpu:" in said and "is constant, so a constant answer would pass" in said, said
    index = Dataset.model_validate_json((root / "dataset.json").read_text())
    entry = next(e for e in index.entries if e.problem == broken)
    assert entry.status == "left-out" and all(r.startswith("on cpu: ") for r in entry.reasons)
    assert not (root / broken).exists() and index.kept == made.kept - 1 and index.left_out == made.left_out + 1
    assert all((root / p).is_dir() for p in kept[1:])
    refused = CliRunner().invoke(app, ["dataset", "recheck", str(tmp_path / "nowhere")])
    assert refused.exit_code != 0 and "no dataset.json" in " ".join(refused.output.split())


def test_a_retry_assembles_again_what_the_cpu_s_check_left_out_and_checks_only_that(tmp_path):
    """`dataset add --retry-left-out`: after a fix (here: the broken reference mended in its
    harvest), the problems the CPU's check left out are assembled again from the harvests given,
    with their weights summed afresh, and checked; the kept ones are neither checked again nor
    weighed twice, and one a GPU's recheck left out ("on cuda: ...") stays out unless that device
    is named (`--retry-left-out-on cuda`)."""
    first = _harvest(tmp_path, "a", seed=0)
    (first / "profile.jsonl").unlink()  # the harvest's own references, as written
    shares = {
        g["problem"]: g["share"]
        for g in json.loads((first / "harvest.json").read_text())["groups"]
        if g["status"] == "written"
    }
    broken = sorted(shares)[0]
    reference = first / broken / "reference.py"
    mended = reference.read_text()
    reference.write_text("def reference(x):\n    return x * 0\n\n" + mended.split("def reference", 1)[0])
    root = tmp_path / "dataset"
    made = add([first], root)
    assert next(e for e in made.entries if e.problem == broken).status == "left-out"
    kept = sorted(e.problem for e in made.entries if e.status == "kept")
    on_gpu = kept[0]  # as `dataset recheck --device cuda` leaves one out
    index = Dataset.model_validate_json((root / "dataset.json").read_text())
    for entry in index.entries:
        if entry.problem == on_gpu:
            entry.status, entry.reasons = "left-out", ["on cuda: workload x: a reason"]
    (root / "dataset.json").write_text(index.model_dump_json(indent=2))
    shutil.rmtree(root / on_gpu)
    weights = {p: load_problem(root / p).spec.weight for p in kept[1:]}

    reference.write_text(mended)
    checked: list[str] = []
    again = add([first], root, retry=True, progress=checked.append)
    back = next(e for e in again.entries if e.problem == broken)
    assert back.status == "kept" and back.weight == pytest.approx(shares[broken], rel=1e-4), back.reasons
    assert check_problem(root / broken).ok and load_problem(root / broken).spec.weight == pytest.approx(back.weight)
    assert [c.split(": ", 1)[1] for c in checked] == [broken]
    assert {p: load_problem(root / p).spec.weight for p in kept[1:]} == weights
    assert next(e for e in again.entries if e.problem == on_gpu).status == "left-out" and not (root / on_gpu).exists()
    assert again.harvests == made.harvests and again.kept == made.kept

    checked.clear()  # named, the device's left-out problems come back too: checked here, rechecked there
    third = add([first], root, retry_on=["cuda"], progress=checked.append)
    back = next(e for e in third.entries if e.problem == on_gpu)
    assert back.status == "kept" and back.weight == pytest.approx(shares[on_gpu], rel=1e-4) and (root / on_gpu).is_dir()
    assert [c.split(": ", 1)[1] for c in checked] == [on_gpu] and third.kept == made.kept + 1


def test_a_folder_that_is_not_a_dataset_is_refused_and_left_alone(tmp_path):
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(GpuarenaError, match="not a dataset folder"):
        add([], tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"
    result = CliRunner().invoke(app, ["dataset", "add", str(tmp_path / "nowhere"), "-o", str(tmp_path / "d")])
    assert result.exit_code != 0 and "no harvest.json" in " ".join(result.output.split())


def test_the_shipped_dataset_is_what_its_index_says():
    index = Dataset.model_validate_json((DATASET / "dataset.json").read_text())
    kept = {e.problem for e in index.entries if e.status == "kept"}
    on_disk = {str(p.parent.relative_to(DATASET)) for p in DATASET.glob("level*/*/problem.toml")}
    assert kept == on_disk and len(kept) >= 100
    models = set()
    for entry in index.entries:
        if entry.status == "kept":
            spec = load_problem(DATASET / entry.problem).spec
            assert spec.weight == pytest.approx(entry.weight, rel=1e-4) and spec.provenance.models
            assert any("cpu" in w.devices for w in spec.workloads)
            models.update(entry.harvests)
        else:
            assert entry.reasons
    assert len({m.split()[0] for m in models}) >= 8  # harvests of at least 8 models
    assert {p.split("/")[0] for p in kept} == {"level1", "level2", "level3", "level4"}  # ops, and modules' graphs
    # attention recorded as cuDNN's op was written anew from the profile as the portable op
    attention = [
        e.problem
        for e in index.entries
        if e.status == "kept" and e.problem.startswith("level1/") and "attention" in e.problem
    ]
    assert attention and all(
        "functional.scaled_dot_product_attention(" in (DATASET / p / "reference.py").read_text() for p in attention
    )


def _sample_of_the_dataset() -> list[Path]:
    """One problem of each level and source framework (the first by name): the default run's
    share of the dataset; the slow test below checks all of them."""
    picked: dict[tuple[str, str], Path] = {}
    for toml in sorted(DATASET.glob("level*/*/problem.toml")):
        spec = tomllib.loads(toml.read_text())
        picked.setdefault((toml.parent.parent.name, spec["provenance"].get("framework", "pytorch")), toml.parent)
    return list(picked.values())


def test_a_problem_of_each_level_and_framework_in_the_dataset_passes_check_on_the_cpu():
    sample = _sample_of_the_dataset()
    frameworks = {tomllib.loads((p / "problem.toml").read_text())["provenance"]["framework"] for p in sample}
    assert len(sample) == 8 and frameworks == {"pytorch", "jax"}  # four levels, PyTorch and JAX references
    failures = {p.name: r.errors for p in sample if not (r := check_problem(p)).ok}
    assert not failures, failures


SHARDS = 8
"""The whole dataset's check in parts, so that the lane's processes share it (about 4.5 minutes
of one process on the 2-core VM, 397 problems)."""


@pytest.mark.harness  # checks every shipped problem's reference: minutes
@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_shipped_dataset_problem_passes_check_on_the_cpu(shard):
    problems = sorted(DATASET.glob("level*/*/problem.toml"))[shard::SHARDS]
    failures = {p.parent.name: r.errors for p in problems if not (r := check_problem(p.parent)).ok}
    assert not failures, failures


def test_a_tolerance_a_gpu_s_recheck_derives_is_checked_on_the_cpu_too(tmp_path, monkeypatch):
    """A device's recheck that widens a problem's tolerance (`outside`, derived at its recorded
    size) checks it again on the CPU, whose small workloads the tolerance governs too: T5's block
    passed the H200's recheck with `outside = 0.0002`, then failed the CPU's check in CI (a fresh
    key weight passed at the small size). The problem is left out, named by the device, so
    `--retry-left-out-on` that device takes it back; a problem whose tolerance did not change is
    not checked again."""
    from gpuarena.dataset import checker as checker_module
    from gpuarena.dataset.assemble import recheck
    from gpuarena.harness.problem_check import CheckReport

    root = tmp_path / "dataset"
    made = add([_harvest(tmp_path, "a", seed=0)], root)
    widened, kept = [e.problem for e in made.entries if e.status == "kept"][:2]
    on_cpu: list[str] = []

    class Stand:
        """The device's checks (none here): the first problem needs a wider tolerance, the other not;
        the CPU's check of a widened problem fails as T5's did."""

        def __init__(self, device: str, isolate: bool | None = None) -> None:
            self.device = device

        def __call__(self, folder: Path) -> CheckReport:
            name = f"{folder.parent.name}/{folder.name}"
            if self.device == "cpu":
                on_cpu.append(name)
                return CheckReport(name=name, errors=["workload small: the output does not depend on input k"])
            wider = "outside" not in (folder / "problem.toml").read_text() and name == widened
            return CheckReport(name=name, outside_needed={"float32": 0.001} if wider else {})

        def __enter__(self) -> Stand:
            return self

        def __exit__(self, *_: object) -> None:
            pass

    monkeypatch.setattr(checker_module, "CandidateChecker", Stand)
    index, newly = recheck(root, "cuda")
    assert on_cpu == [widened]  # only the problem whose tolerance the device widened
    (left,) = newly
    assert left.problem == widened and left.reasons == [
        "on cuda: the tolerance derived here fails the CPU's check: workload small: the output does not depend on input k"
    ]
    assert retried(index.entries, ["cuda"]) >= {widened} and (root / kept).exists()


def test_problems_an_honest_framework_failed_in_a_suite_run_are_left_out_with_its_verdict(tmp_path):
    """`dataset leave-out ROOT --failed-in SUITE.json`: a problem whose framework implementation
    (torch.compile of its reference, an honest kernel) gave wrong values leaves the dataset with the
    run's reason, named by device so that `--retry-left-out-on` can take it back; problems that
    passed, failed for other reasons or are not in the dataset are untouched, and a file that is
    not a suite result is refused with nothing changed."""
    from gpuarena.suite.model import ProblemTime, SuiteResult

    root = tmp_path / "dataset"
    made = add([_harvest(tmp_path, "a", seed=0)], root)
    kept = sorted(e.problem for e in made.entries if e.status == "kept")
    wrong, passed, crashed = kept[0], kept[1], kept[2]

    def timed(problem: str, status: str, reason: str = "") -> ProblemTime:
        return ProblemTime(problem=problem, level=1, weight=1.0, status=status, reason=reason)

    run = SuiteResult(
        framework="torch-compile",
        device="cuda",
        device_name="NVIDIA H200",
        environment={},
        command="gpuarena suite run",
        problems=[
            timed(wrong, "WRONG_VALUES", "workload w: 3 of 9 elements outside"),
            timed(passed, "PASSED"),
            timed(crashed, "ERROR", "out of memory"),
            timed("level1/elsewhere", "WRONG_VALUES", "not in this dataset"),
        ],
    )
    (tmp_path / "run.json").write_text(run.model_dump_json())
    (tmp_path / "bad.json").write_text("{}")
    cli = CliRunner()
    refused = cli.invoke(app, ["dataset", "leave-out", str(root), "--failed-in", str(tmp_path / "bad.json")])
    assert refused.exit_code == 2 and "not a suite result" in " ".join(refused.output.split())
    assert Dataset.model_validate_json((root / "dataset.json").read_text()).kept == made.kept
    done = cli.invoke(app, ["dataset", "leave-out", str(root), "--failed-in", str(tmp_path / "run.json")])
    assert done.exit_code == 0, done.output
    index = Dataset.model_validate_json((root / "dataset.json").read_text())
    entry = next(e for e in index.entries if e.problem == wrong)
    assert entry.status == "left-out" and not (root / wrong).exists()
    assert entry.reasons == [
        "on cuda: torch-compile of the reference, an honest implementation, gave wrong values "
        "on NVIDIA H200: workload w: 3 of 9 elements outside"
    ]
    assert index.kept == made.kept - 1 and (root / passed).is_dir() and (root / crashed).is_dir()
    assert wrong in retried(index.entries, ["cuda"]) and wrong not in retried(index.entries)


def test_problems_named_with_a_reason_are_left_out_and_the_index_keeps_why(tmp_path):
    """`gpuarena dataset leave-out ROOT --problem ID --reason TEXT`: a problem found wanting by
    reading it (a reference whose activation the writer fixed to zeros measures nothing) leaves
    with the reason in dataset.json and its folder removed; an id the dataset does not keep, or a
    --problem without a reason, is refused and nothing changes."""
    from gpuarena.dataset.assemble import Entry

    root = tmp_path / "dataset"
    for name in ("level3/a", "level3/b"):
        (root / name).mkdir(parents=True)
        (root / name / "problem.toml").write_text("# a stand-in\n")
    entries = [Entry(problem=n, status="kept", weight=0.5, harvests=["h"]) for n in ("level3/a", "level3/b")]
    (root / "dataset.json").write_text(
        Dataset(harvests=["h"], kept=2, left_out=0, left_out_share=0.0, entries=entries).model_dump_json()
    )
    before = (root / "dataset.json").read_text()
    for args in (["--problem", "level3/nope", "--reason", "why"], ["--problem", "level3/a"], []):
        refused = CliRunner().invoke(app, ["dataset", "leave-out", str(root), *args])
        assert refused.exit_code != 0, refused.output
        assert (root / "dataset.json").read_text() == before and (root / "level3" / "a").is_dir()
    reason = "its activation is a constant the writer fixed: it measures a broadcast"
    result = CliRunner().invoke(app, ["dataset", "leave-out", str(root), "--problem", "level3/a", "--reason", reason])
    assert result.exit_code == 0, result.output
    index = Dataset.model_validate_json((root / "dataset.json").read_text())
    left = {e.problem: e for e in index.entries}
    assert left["level3/a"].status == "left-out" and left["level3/a"].reasons == [reason]
    assert left["level3/b"].status == "kept" and (index.kept, index.left_out) == (1, 1)
    assert not (root / "level3" / "a").exists() and (root / "level3" / "b").is_dir()
