"""The example apps of the track's two directions, end to end on the CPU: a JAX model checked
by its PyTorch port (mlp_reference against jax_reference's golden outputs), and a Transformers
decoder checked against itself and against a port with one wrong constant. (The GPU goldens
of the closing note come from `gpuarena app record --device cuda` on the lent GPU.)"""

from __future__ import annotations

import json

import pytest

from gpuarena.migration.golden import make_writable

from .test_cli import EXAMPLES, invoke

pytestmark = pytest.mark.harness

ONCE = ("--repeats", "1")
"""What these tests check is the outputs: one run of each app, not app.toml's three (8 s a run of the decoder)."""


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    made = []

    def record(app: str, *options: str):
        folder = tmp_path_factory.mktemp(app) / "golden"
        result = invoke("record", EXAMPLES / app, "--device", "cpu", "-o", folder, *options)
        assert result.exit_code == 0, result.output
        made.append(folder)
        return folder

    yield record
    for folder in made:
        make_writable(folder)


def _check(app: str, golden_folder, tmp_path, *options: str) -> dict:
    result = invoke("check", EXAMPLES / app, "--golden", golden_folder, "-o", tmp_path / "report", *options)
    assert result.exit_code == 0, result.output
    return json.loads((tmp_path / "report" / "report.json").read_text())


def test_the_pytorch_port_of_the_jax_model_matches_its_golden_outputs(golden, tmp_path):
    pytest.importorskip("jax")
    report = _check("mlp_reference", golden("jax_reference", *ONCE), tmp_path, *ONCE)
    assert report["ran"] and all(o["matched"] for o in report["outputs"]), report["outputs"]
    assert (report["score"]["running"], report["score"]["matching"]) == (60, 40)
    assert json.loads((tmp_path / "report" / "report.json").read_text())["golden_environment"]


def test_the_transformers_decoder_matches_itself_and_its_broken_port_does_not(golden, tmp_path):
    pytest.importorskip("transformers")
    reference = golden("transformers_decoder", *ONCE)
    tokens = json.loads((reference / "outputs" / "tokens.json").read_text())
    assert len(tokens) == 8 + 32 and len(set(tokens[8:])) > 8  # greedy, and not one token repeated
    same = _check("transformers_decoder", reference, tmp_path / "same", *ONCE)
    assert all(o["matched"] for o in same["outputs"]) and same["score"]["matching"] == 40
    broken = _check("transformers_decoder_broken", reference, tmp_path / "broken", *ONCE)
    assert broken["ran"] and not any(o["matched"] for o in broken["outputs"])
    assert broken["score"]["total"] < 70 and broken["score"]["speed"] == 0
