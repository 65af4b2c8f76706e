"""Community samples (issue 21, the CCF dataset track): `gpuarena sample check` passes an honest
sample with both kernels' speed-ups, finds a sample that repeats a dataset problem however its
reference is written, and says what is wrong with a broken one, losing nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset.fingerprint import fingerprint, fingerprints
from gpuarena.dataset.sample import check_sample
from gpuarena.problems import load_problem
from gpuarena.problems.loader import resolve_problem

HONEST = Path(__file__).parent / "samples" / "rms_scale"

SOFTMAX_TOML = """name = "row_softmax"
level = 1
summary = "Softmax of each row."
weight = 1.0
convention = "return"
outputs = ["y"]

[[workloads]]
name = "rows-64"
axes = {{ rows = 64, cols = 1000 }}
dtype = "float32"
devices = ["cpu", "cuda"]
{extra}"""

SOFTMAX_REFERENCE = """import torch
import torch.nn.functional as F


def reference(x):
    return F.softmax(x, dim=-1)


def make_inputs(axes, dtype, device, generator):
    return {"x": torch.randn(axes["rows"], axes["cols"], generator=generator, device=device).to(dtype)}
"""

SOFTMAX_KERNEL = "import torch\n\n\ndef solve(x):\n    return torch.softmax(x, dim=-1)\n"


def copy_sample(tmp_path: Path) -> Path:
    return Path(shutil.copytree(HONEST, tmp_path / "sample"))


def softmax_sample(tmp_path: Path, extra_workload: str = "") -> Path:
    """A sample whose problem is the bundled softmax on its small-64x1000 workload, written otherwise."""
    sample = copy_sample(tmp_path)
    (sample / "problem" / "problem.toml").write_text(SOFTMAX_TOML.format(extra=extra_workload))
    (sample / "problem" / "reference.py").write_text(SOFTMAX_REFERENCE)
    (sample / "first.py").write_text(SOFTMAX_KERNEL)
    (sample / "optimised.py").write_text(SOFTMAX_KERNEL)
    return sample


@pytest.mark.harness
def test_an_honest_sample_is_ok_with_both_kernels_speed_ups(tmp_path):
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, ["sample", "check", str(HONEST), "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("ok")
    report = json.loads(out.read_text())
    assert report["verdict"] == "ok" and report["errors"] == [] and report["problem"] == "rms_scale"
    for part in ("first", "optimised"):
        assert report[part]["status"] == "PASSED" and report[part]["score"] > 0
    assert report["optimised_over_first"] == pytest.approx(report["optimised"]["score"] / report["first"]["score"])
    assert report["duplicates"] == []
    assert "speed-up" in result.output


@pytest.mark.harness
def test_a_sample_that_repeats_a_dataset_problem_is_a_duplicate(tmp_path):
    """Same operator on the same shapes as level1/softmax's small-64x1000, through F.softmax
    instead of torch.softmax(x.float()).to(x.dtype): a duplicate (exit 1)."""
    sample = softmax_sample(tmp_path)
    report = check_sample(sample)
    assert report.verdict == "duplicate" and not report.ok and report.errors == []
    assert [(d.problem, d.workloads, d.whole) for d in report.duplicates] == [
        ("level1/softmax", {"rows-64": "small-64x1000"}, True)
    ]
    result = CliRunner().invoke(app, ["sample", "check", str(sample)])
    assert result.exit_code == 1 and "repeats level1/softmax: rows-64 = small-64x1000" in result.output


@pytest.mark.harness
def test_a_sample_that_adds_a_shape_overlaps_but_is_ok(tmp_path):
    extra = (
        '\n[[workloads]]\nname = "rows-96"\naxes = { rows = 96, cols = 1000 }\ndtype = "float32"\ndevices = ["cpu"]\n'
    )
    report = check_sample(softmax_sample(tmp_path, extra), budget_s=0.1)
    assert report.verdict == "ok", report.errors
    assert [(d.problem, d.whole) for d in report.duplicates] == [("level1/softmax", False)]


@pytest.mark.harness
def test_the_dataset_to_compare_with_can_be_named(tmp_path):
    """--problems: the sample is checked against these roots instead of the bundled problems."""
    root = tmp_path / "dataset"
    shutil.copytree(HONEST / "problem", root / "level1" / "rms_scale")
    report = check_sample(HONEST, dataset=[root], budget_s=0.1)
    assert report.verdict == "duplicate"
    assert report.duplicates[0].problem == "level1/rms_scale" and report.duplicates[0].whole


@pytest.mark.harness
def test_a_kernel_with_wrong_values_makes_the_sample_broken(tmp_path):
    sample = copy_sample(tmp_path)
    (sample / "first.py").write_text("import torch\n\n\ndef solve(x):\n    return x * 0.5\n")
    report = check_sample(sample, budget_s=0.1)
    assert report.verdict == "broken"
    assert report.first.status == "WRONG_VALUES" and report.optimised.status == "PASSED"
    assert any(e.startswith("first: first.py is WRONG_VALUES") for e in report.errors)
    assert (sample / "first.py").exists()  # nothing of the sample is touched


@pytest.mark.harness
def test_missing_and_empty_parts_are_named(tmp_path):
    sample = copy_sample(tmp_path)
    (sample / "optimised.py").unlink()
    (sample / "prompt.md").write_text("  \n")
    (sample / "report.md").write_text("From a model.")
    report = check_sample(sample, budget_s=0.1)
    assert report.verdict == "broken" and report.optimised is None
    text = "\n".join(report.errors)
    assert "optimised: " in text and "does not exist" in text
    assert "prompt: " in text and "is empty" in text
    assert "fewer than 20 words" in text


def test_a_problem_that_check_rejects_makes_the_sample_broken(tmp_path):
    sample = copy_sample(tmp_path)
    reference = sample / "problem" / "reference.py"
    reference.write_text(
        reference.read_text().replace(
            "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)", "return torch.zeros_like(x)"
        )
    )
    report = check_sample(sample)
    assert report.verdict == "broken" and report.first is None  # no kernel runs on a broken problem
    assert any(e.startswith("problem: ") for e in report.errors)


@pytest.mark.parametrize(
    "manifest, words",
    [
        (None, "no sample.toml"),
        ("[sample]\ncontributor = 'alice'\n", "sample.llm: Field required"),
        ("[sample]\ncontributor = 'a'\nllm = 'b'\nfirst = '../../etc/passwd'\n", "outside the sample's folder"),
        ("[sample\n", "not valid TOML"),
    ],
)
def test_a_bad_manifest_says_what_to_fix(tmp_path, manifest, words):
    sample = copy_sample(tmp_path)
    if manifest is None:
        (sample / "sample.toml").unlink()
    else:
        (sample / "sample.toml").write_text(manifest)
    report = check_sample(sample)
    assert report.verdict == "broken" and any(words in e for e in report.errors), report.errors
    assert report.first is None  # nothing runs from a sample whose manifest is wrong


def test_a_fingerprint_is_the_operators_on_the_shapes_however_written(tmp_path):
    softmax = resolve_problem("level1/softmax")
    small = next(w for w in softmax.spec.workloads if w.name == "small-64x1000")
    sample = softmax_sample(tmp_path)
    ours = load_problem(sample / "problem")
    assert fingerprint(ours, ours.spec.workloads[0]) == fingerprint(softmax, small)
    other = next(w for w in softmax.spec.workloads if w.name == "small-128x4096")
    assert fingerprint(softmax, other) != fingerprint(softmax, small)
    # fake tensors: a GPU-size workload costs nothing; all of them get one
    assert set(fingerprints(softmax)) == {w.name for w in softmax.spec.workloads}


def test_a_reference_that_needs_real_values_is_fingerprinted_on_small_inputs():
    router = resolve_problem("level4/moe_topk_router")
    found = fingerprints(router)
    small = [w.name for w in router.spec.workloads if "cpu" in w.devices]
    assert small and set(small) <= set(found)


SNOOPING_REFERENCE = """import os
from pathlib import Path

import torch

SECRET = Path(os.environ.get("GPUARENA_TEST_SECRET", "{secret}"))


def reference(x):
    return x * 2.0


def make_inputs(axes, dtype, device, generator):
    try:
        found = SECRET.read_text()
    except OSError as exc:
        found = f"unreadable: {{type(exc).__name__}}"
    Path("{loot}").parent.mkdir(parents=True, exist_ok=True)
    raise RuntimeError("the runner's secret: " + found)
"""


@pytest.mark.harness
def test_a_samples_code_runs_in_the_sandbox_away_from_the_runners_files(tmp_path):
    """A sample's reference is the contributor's code: on a runner the check runs in the
    harness's sandbox, so a reference that reads the runner's files finds nothing there, and
    an honest sample is ok through the same sandbox."""
    from gpuarena.bundled import bundled_root
    from gpuarena.dataset.sample_job import contained_check
    from gpuarena.harness.launch.containment import sandbox_problem

    if sandbox_problem():
        pytest.skip(f"no sandbox here: {sandbox_problem()}")
    honest = contained_check(copy_sample(tmp_path), [bundled_root()], "cpu", 0.2)
    assert honest.verdict == "ok", honest.errors
    assert honest.optimised is not None and honest.optimised.status == "PASSED" and honest.optimised.score > 0

    secret = tmp_path / "runner" / "token"
    secret.parent.mkdir()
    secret.write_text("s3cr3t-runner-token")
    secret.chmod(0o600)
    sample = copy_sample(tmp_path / "snoop")
    (sample / "problem" / "reference.py").write_text(
        SNOOPING_REFERENCE.format(secret=secret, loot=tmp_path / "runner" / "loot" / "x")
    )
    snooped = contained_check(sample, [bundled_root()], "cpu", 0.2)
    assert snooped.verdict == "broken"
    text = snooped.model_dump_json()
    assert "s3cr3t-runner-token" not in text
    assert "unreadable" in text  # it ran, and found nothing
    assert not (tmp_path / "runner" / "loot").exists()  # nor could it write beside the runner's files
    # outside the sandbox the same reference reads the token: the test would see a hole
    assert "s3cr3t-runner-token" in check_sample(sample).model_dump_json()
