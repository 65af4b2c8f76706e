"""Issue 48, the sample track: the duplicate check compares computations, not spellings; a JAX
problem in the dataset is fingerprinted on JAX's side instead of crashing the check; a sample's
score is over the canonical reference, so a deliberately slow reference does not inflate it; and
a sample's weight is the dataset's."""

from __future__ import annotations

import importlib.util
import shutil
import statistics
import tomllib
from pathlib import Path

import pytest
import torch
from tests.contests.factory import contest, entry
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.contests.rules import ccf_dataset
from gpuarena.dataset.fingerprint import fingerprints
from gpuarena.dataset.sample import find_duplicates
from gpuarena.dataset.sample_pack import problem_files, sample_solution
from gpuarena.dataset.sample_score import PIECES, canonical_score
from gpuarena.dataset.sample_weight import SAMPLE_WEIGHTS, with_dataset_weight
from gpuarena.problems import load_problem

REPO = Path(__file__).resolve().parents[2]
HONEST = Path(__file__).parent / "samples" / "rms_scale"
DATASET = REPO / "dataset" / "problems"
JAX_PROBLEM = "level1/jax-add-d8c2d718"
TORCH_PROBLEM = "level1/silu-2a822f50"
HAS_JAX = importlib.util.find_spec("jax") is not None

TOML = """name = "{name}"
level = 1
summary = "A norm over the last dim."
convention = "return"
outputs = ["y"]

[[workloads]]
name = "w"
axes = {{ {axes} }}
dtype = "float32"
devices = ["cpu", "cuda"]
"""

INPUTS = """

def make_inputs(axes, dtype, device, generator):
    shape = [axes[k] for k in ("b", "s", "h") if k in axes]
    return {{"x": torch.randn(*shape, generator=generator, device=device).to(dtype),
            "w": torch.randn(axes["h"], generator=generator, device=device).to(dtype)}}
"""

SPELLINGS = {
    "functional": "F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)",
    "module": "torch.nn.RMSNorm(x.shape[-1], eps=1e-6, elementwise_affine=False)(x) * w",
    "hand": "x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * w",
    "layernorm": "F.layer_norm(x, (x.shape[-1],), w, eps=1e-6)",
    "softmax_last": "torch.softmax(x, dim=-1) * w",
    "softmax_first": "torch.softmax(x, dim=0) * w",
}


def norm_problem(root: Path, name: str, body: str, axes: str) -> Path:
    """A problem computing `body` of x and w, its x of the given axes (b, s, h or s, h)."""
    folder = root / "level1" / name
    folder.mkdir(parents=True)
    (folder / "problem.toml").write_text(TOML.format(name=name.replace("_", "-"), axes=axes))
    reference = f"import torch\nimport torch.nn.functional as F\n\n\ndef reference(x, w):\n    return {body}\n"
    (folder / "reference.py").write_text(reference + INPUTS.format())
    return folder


def canonical(folder: Path) -> object:
    return fingerprints(load_problem(folder), canonical=True)["w"]


def test_spellings_of_one_computation_have_one_canonical_fingerprint(tmp_path):
    """F.rms_norm, nn.RMSNorm and x * rsqrt(mean(x^2) + eps) * w, on [2, 64, 96] and on the batch
    merged, [128, 96]: one computation. The plain fingerprint tells them apart."""
    found = {}
    for spelling in ("functional", "module", "hand"):
        for axes in ("b = 2, s = 64, h = 96", "s = 128, h = 96"):
            folder = norm_problem(tmp_path, f"{spelling}_{len(found)}", SPELLINGS[spelling], axes)
            found[(spelling, axes)] = canonical(folder)
    assert len(set(map(repr, found.values()))) == 1, found
    plain = {repr(fingerprints(load_problem(tmp_path / "level1" / f"hand_{k}"))) for k in (4, 5)}
    assert len(plain) == 2  # [2, 64, 96] and [128, 96] were two problems before


def test_different_computations_stay_apart(tmp_path):
    """LayerNorm is not RMSNorm, a softmax over the first dim is not one over the last, and the
    same norm on another hidden size is another workload."""
    axes = "b = 4, s = 32, h = 32"
    keys = {name: repr(canonical(norm_problem(tmp_path, name, SPELLINGS[name], axes))) for name in SPELLINGS}
    assert keys["functional"] == keys["hand"] == keys["module"]
    assert len({keys["hand"], keys["layernorm"], keys["softmax_last"], keys["softmax_first"]}) == 4
    wider = norm_problem(tmp_path, "wider", SPELLINGS["hand"], "b = 4, s = 32, h = 64")
    assert repr(canonical(wider)) != keys["hand"]


def test_a_sample_that_respells_a_dataset_problem_is_its_duplicate(tmp_path):
    """The sample's F.rms_norm on [B, S, H] repeats the dataset's hand-written RMSNorm on [B*S, H];
    its LayerNorm would not."""
    dataset = tmp_path / "dataset"
    norm_problem(dataset, "rmsnorm", SPELLINGS["hand"], "s = 128, h = 96")
    sample = norm_problem(tmp_path / "sample", "mine", SPELLINGS["functional"], "b = 2, s = 64, h = 96")
    found = find_duplicates(sample, [dataset])
    assert [(d.problem, d.workloads, d.whole) for d in found] == [("level1/rmsnorm", {"w": "w"}, True)]
    other = norm_problem(tmp_path / "other", "mine", SPELLINGS["layernorm"], "b = 2, s = 64, h = 96")
    assert find_duplicates(other, [dataset]) == []


def test_a_fake_tensor_never_reaches_jax(tmp_path):
    """The SIGSEGV's mechanism: a fingerprint's fake tensor handed to JAX through DLPack (a
    pointer to nothing). Now the bridge refuses it, and the JAX problem is fingerprinted with
    jax.make_jaxpr on shapes."""
    if not HAS_JAX:
        pytest.skip("JAX is not installed in this environment: the JAX problem cannot be loaded")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from gpuarena.jax_bridge import NoData

    problem = load_problem(DATASET / JAX_PROBLEM)
    with FakeTensorMode(), pytest.raises(NoData, match="no memory"):
        problem.reference(x0=torch.ones(1, 128, 512))
    found = fingerprints(problem, canonical=True)
    assert set(found) == {w.name for w in problem.spec.workloads}  # every model's shapes and the CPU's
    assert all(call[0].startswith("jax.") for calls in found.values() for call, _ in calls)


def _fixture_dataset(tmp_path: Path) -> Path:
    """A dataset folder with a PyTorch problem and, where JAX is installed, a JAX one."""
    root = tmp_path / "problems"
    names = [TORCH_PROBLEM] + ([JAX_PROBLEM] if HAS_JAX else [])
    for name in names:
        shutil.copytree(DATASET / name, root / name)
    return root


@pytest.mark.harness
@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX started by an earlier test here
def test_sample_check_against_a_dataset_with_a_jax_problem(tmp_path):
    """`gpuarena sample check --problems` over a folder of dataset problems, a JAX one among
    them: the check ends with its verdict (it died with SIGSEGV, issue 48)."""
    root = _fixture_dataset(tmp_path)
    out = tmp_path / "report.json"
    result = CliRunner().invoke(
        app, ["sample", "check", str(HONEST), "--problems", str(root), "--budget", "0.1", "--json", str(out)]
    )
    assert result.exit_code in (0, 1), result.output
    report = out.read_text()
    assert '"duplicates": []' in report
    assert "note: problem.toml sets weight = 0.8" in result.output
    if not HAS_JAX:
        pytest.skip("JAX is not installed: only the PyTorch half of the dataset was checked against")


SLOW = """import torch

EPS = 1e-6


def reference(x):
    for _ in range(60):  # deliberately slow: the same work sixty times, the last result kept
        y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return y
"""

LOOP = """import torch

EPS = 1e-6


def reference(x):
    # deliberately slow: row by row in Python
    return torch.stack([row * torch.rsqrt(row.pow(2).mean() + EPS) for row in x])
"""

INPUTS_RMS = (HONEST / "problem" / "reference.py").read_text().split("def make_inputs")[1]


def slow_sample(tmp_path: Path, reference: str) -> Path:
    sample = Path(shutil.copytree(HONEST, tmp_path / "sample"))
    (sample / "problem" / "reference.py").write_text(reference + "\n\ndef make_inputs" + INPUTS_RMS)
    return sample


def test_a_slow_reference_does_not_inflate_the_score_nor_win_the_tie_break(tmp_path):
    """The same kernel on the honest rms_scale and on one whose reference does its work 60 times:
    over its own reference the kernel looks ~60x faster there, but the recorded score is over
    the canonical graph (the repeats left out), so it is not, and ccf-dataset's tie-break does
    not rank the slow sample's contributor first by a wide margin."""
    honest_problem = load_problem(HONEST / "problem")
    slow_problem = load_problem(slow_sample(tmp_path, SLOW) / "problem")
    kernel_speedup = 2.0  # the kernel's speed-up over the honest reference
    honest = canonical_score(honest_problem, "cpu", kernel_speedup, {})
    # what the harness would measure over the slow reference: the same kernel, a slower reference
    slowdown_own = statistics.geometric_mean(
        s.reference_s / h.reference_s
        for s, h in zip(canonical_score(slow_problem, "cpu", 1.0, {}).workloads, honest.workloads)
    )
    over_own = kernel_speedup * slowdown_own
    slow = canonical_score(slow_problem, "cpu", over_own, {})
    assert slowdown_own > 10  # the reference is deliberately slow
    assert slow.score is not None and honest.score is not None
    assert slow.reference_slowdown is not None and slow.reference_slowdown > 5
    assert slow.score == pytest.approx(over_own / slow.reference_slowdown)
    assert slow.score < over_own / 5  # not inflated: at most the slack over what the kernel earns
    assert "canonical graph" in slow.basis
    entries = [
        entry("honest", "samples", 1.0, samples_accepted=1, samples_score=honest.score),
        entry("slow", "samples", 1.0, samples_accepted=1, samples_score=slow.score),
    ]
    standings = ccf_dataset.standings(contest({"name": "ccf-dataset"}, ["samples"]), entries)
    figures = {row.contestant: row.figures["sample score"] for row in standings.rows}
    assert figures["slow"] < 5 * figures["honest"]  # over its own reference it would be ~60x


def test_a_reference_split_into_pieces_gets_no_score(tmp_path):
    """A Python loop over rows replays as slowly as it runs, so it is no canonical reference:
    without the dataset's reference for the computation the sample gets no score, and says why."""
    problem = load_problem(slow_sample(tmp_path, LOOP) / "problem")
    scored = canonical_score(problem, "cpu", 50.0, {})
    assert scored.score is None
    assert "no canonical reference" in scored.basis and "loop" in scored.basis
    assert all(w.pieces >= PIECES for w in scored.workloads)


def test_a_contributors_weight_is_the_datasets_when_accepted(tmp_path):
    """rms_scale's problem.toml sets weight = 0.8: the check notes that the dataset overrides it,
    and the problem the dataset takes has the dataset's weight for level 1, workloads equal."""
    sample = Path(shutil.copytree(HONEST, tmp_path / "sample"))
    toml = sample / "problem" / "problem.toml"
    toml.write_text(toml.read_text().replace('dtype = "float32"\n', 'dtype = "float32"\nweight = 9.0\n', 1))
    taken = tomllib.loads(problem_files(sample_solution(sample))["problem.toml"])
    assert taken["weight"] == SAMPLE_WEIGHTS[1]
    assert all("weight" not in w for w in taken["workloads"])
    assert taken["name"] == "rms_scale" and len(taken["workloads"]) == 2  # nothing else changed
    _, overridden = with_dataset_weight(toml.read_text())
    assert overridden == ["weight = 0.8", "workload small-48x96's weight = 9.0"]


def test_a_weight_the_dataset_cannot_override_is_refused():
    """A weight inside an inline table cannot be rewritten line by line: the check calls the
    sample broken (sample._weights), so it is never accepted with the contributor's weight."""
    text = 'name = "n"\nlevel = 1\nsummary = "s"\nweight = 0.8\n'
    text += 'workloads = [{ name = "w", axes = { rows = 8 }, dtype = "float32", weight = 3.0 }]\n'
    with pytest.raises(ValueError, match="inline table"):
        with_dataset_weight(text)


def test_the_sample_weights_are_the_shipped_datasets_medians():
    weights: dict[int, list[float]] = {}
    for path in DATASET.glob("level*/*/problem.toml"):
        spec = tomllib.loads(path.read_text())
        if spec.get("weight", 1.0) > 0:  # an op a kept fusion claims whole weighs 0: no sample's weight
            weights.setdefault(spec["level"], []).append(spec.get("weight", 1.0))
    for level, found in weights.items():
        assert SAMPLE_WEIGHTS[level] == pytest.approx(statistics.median(found), rel=0.25), level
