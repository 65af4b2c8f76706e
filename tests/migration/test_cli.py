"""End to end through the CLI: record a golden, check ports against it, read the reports."""

from __future__ import annotations

import json
import math
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.harness.launch.containment import sandbox_problem
from gpuarena.migration.golden import make_writable

from .helpers import tensor_app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "apps"
runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, ["app", *map(str, args)])


@pytest.fixture(scope="module")
def mlp_golden(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp") / "golden"
    result = invoke("record", EXAMPLES / "mlp_reference", "--device", "cpu", "-o", folder)
    assert result.exit_code == 0, result.output
    assert "recorded mlp_reference: 4 output(s)" in result.output
    yield folder
    make_writable(folder)


@pytest.mark.harness
def test_golden_record_is_read_only_and_hashed(mlp_golden):
    golden = json.loads((mlp_golden / "golden.json").read_text())
    assert sorted(golden["outputs"]) == ["logits.npy", "mlp_out.npy", "probs.npy", "tokens.json"]
    assert golden["command"] == ["entry", "app.py:main"]
    assert golden["performance"]["name"] == "tokens_per_s" and len(golden["performance"]["samples"]) == 3
    assert {"python", "torch", "numpy", "device_name", "platform"} <= set(golden["environment"])
    for path in (mlp_golden / "golden.json", mlp_golden / "app.toml", mlp_golden / "outputs" / "probs.npy"):
        assert not path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    again = invoke("record", EXAMPLES / "mlp_reference", "-o", mlp_golden)
    assert again.exit_code == 2 and "not empty" in again.output


@pytest.mark.harness
def test_repeats_from_the_command_line_replace_the_app_s_own(mlp_golden, tmp_path):
    """`--repeats N` runs the app N times instead of app.toml's (3 here); out of app.toml's range it
    is refused and nothing is recorded."""
    folder = tmp_path / "once"
    result = invoke("record", EXAMPLES / "mlp_reference", "-o", folder, "--repeats", "1")
    assert result.exit_code == 0, result.output
    assert len(json.loads((folder / "golden.json").read_text())["performance"]["samples"]) == 1
    make_writable(folder)
    report = tmp_path / "report"
    result = invoke("check", EXAMPLES / "mlp_port", "--golden", mlp_golden, "-o", report, "--repeats", "2")
    assert result.exit_code == 0, result.output
    assert len(json.loads((report / "report.json").read_text())["runs"]) == 2
    for wrong in ("0", "101"):
        refused = invoke("record", EXAMPLES / "mlp_reference", "-o", tmp_path / wrong, "--repeats", wrong)
        assert refused.exit_code == 2 and f"--repeats {wrong}: Input should be" in refused.output
        assert not (tmp_path / wrong).exists()


@pytest.mark.harness
def test_correct_port(mlp_golden, tmp_path):
    result = invoke("check", EXAMPLES / "mlp_port", "--golden", mlp_golden, "-o", tmp_path / "report", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["ran"] and all(o["matched"] for o in report["outputs"])
    score = report["score"]
    # 60 ran + 40 (all 4 outputs matched); the speed-up part depends on this machine's timing,
    # so it is checked against the rule: 0 unless the interval's low end is above 1
    assert (score["running"], score["matching"]) == (60, 40)
    low = report["performance"]["speedup"]["low"]
    assert score["speed"] == (0 if low <= 1 else min(50, math.floor(50 * math.log2(low) + 0.5)))
    assert score["total"] == 100 + score["speed"]
    html = (tmp_path / "report" / "report.html").read_text()
    assert "<script" not in html and "http" not in html and "mlp_port" in html
    # the example ports run in the harness's sandbox wherever bubblewrap runs, and say so
    sandboxed = not sandbox_problem()
    assert report["sandboxed"] is sandboxed and report["environment"]["app_containment"] == report["containment"]
    assert report["containment"].startswith("bubblewrap:" if sandboxed else "none: no sandbox")
    assert ("<p>Sandboxed: bubblewrap:" if sandboxed else "Not sandboxed") in html
    assert report["golden_environment"]["app_containment"].startswith("bubblewrap:" if sandboxed else "none:")


@pytest.mark.harness
def test_broken_port(mlp_golden, tmp_path):
    result = invoke("check", EXAMPLES / "mlp_port_broken", "--golden", mlp_golden, "-o", tmp_path / "r")
    assert result.exit_code == 0, result.output
    # probs.npy: softmax over the batch axis, every element outside the tolerance -> closeness 0;
    # the other 3 match: 60 + half_up(40 * (1 + 1 + 1 + 0) / 4) = 60 + 30 = 90, no speed-up points
    assert "score 90 = 60 ran + 30 match + 0 speed-up" in result.output
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    probs = next(o for o in report["outputs"] if o["file"] == "probs.npy")
    assert not probs["matched"] and probs["closeness"] == 0.0 and len(probs["worst"]) == 5
    assert "probs.npy" in (tmp_path / "r" / "report.html").read_text()


@pytest.mark.harness
def test_deterministic_speedup_and_a_mismatch(tmp_path):
    """Apps reporting fixed figures: the whole score is known by hand."""
    golden = tmp_path / "golden"
    tensor_app(tmp_path / "ref", figure="100.0", name="ref")
    assert invoke("record", tmp_path / "ref", "-o", golden).exit_code == 0
    tensor_app(tmp_path / "fast", figure="150.0", name="fast")
    result = invoke("check", tmp_path / "fast", "--golden", golden)
    # all matched: 100; speed-up 150/100 = 1.5 with a zero-width interval: half_up(50 * log2 1.5) = 29
    assert result.exit_code == 0 and "score 129 = 60 ran + 40 match + 29 speed-up" in result.output
    tensor_app(tmp_path / "off", values="[1.0, 2.0, 4.0]", figure="400.0", name="off")
    result = invoke("check", tmp_path / "off", "--golden", golden)
    # 2 of 3 elements within tolerance: closeness 2/3, v = 1/3, half_up(40/3 = 13.33) = 13; no speed points
    assert "score 73 = 60 ran + 13 match + 0 speed-up" in result.output
    make_writable(golden)


@pytest.mark.harness
def test_did_not_run_and_tampered_golden(tmp_path):
    golden = tmp_path / "golden"
    tensor_app(tmp_path / "ref", name="ref")
    assert invoke("record", tmp_path / "ref", "-o", golden).exit_code == 0
    crash = tensor_app(tmp_path / "crash", name="crash", extra_code="raise SystemExit(5)")
    result = invoke("check", crash, "--golden", golden, "--json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["score"]["total"] == 0 and "exited with status 5" in report["reason"]
    make_writable(golden)
    (golden / "outputs" / "y.npy").write_bytes(b"tampered")
    result = invoke("check", tmp_path / "ref", "--golden", golden)
    assert result.exit_code == 2 and "changed since it was recorded" in result.output


def test_html_escapes(tmp_path):
    from gpuarena.migration.report import MigrationReport, render_html
    from gpuarena.migration.score import score

    report = MigrationReport(
        app="<b>x</b>",
        golden_app="g",
        device="cpu",
        golden_device="cpu",
        golden_environment={},
        environment={},
        ran=False,
        reason="<script>alert(1)</script>",
        score=score(False, []),
    )
    html = render_html(report)
    assert "<script>alert" not in html and "&lt;script&gt;" in html
