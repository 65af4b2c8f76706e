"""A JAX model harvested on a GPU (issue 48: JAX problems at real sizes): its weights and
primitives on the GPU, each candidate checked there, and the dataset's assembly giving the
recorded shapes to the GPU alone and a CPU-sized workload to machines without one."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset.assemble import add

jax = pytest.importorskip("jax")

pytestmark = pytest.mark.gpu


def _gpus() -> int:
    try:
        return len(jax.devices("gpu"))
    except RuntimeError:
        return 0


@pytest.mark.skipif(not _gpus(), reason="JAX sees no GPU here")
def test_a_jax_model_harvested_on_the_gpu_is_checked_there_and_assembled_for_both(tmp_path) -> None:
    out = tmp_path / "tiny"
    ran = CliRunner().invoke(
        app,
        [
            "harvest",
            "jax:tiny-llama",
            "--device",
            "cuda",
            "--seq",
            "64",
            "--repeats",
            "1",
            "--min-share",
            "0",
            "-o",
            str(out),
        ],
    )
    assert ran.exit_code == 0, ran.output
    report = json.loads((out / "harvest.json").read_text())
    assert report["device"] == "cuda" and report["written"] > 0, report
    written = [g for g in report["groups"] if g["status"] == "written"]
    assert all(
        "on cuda" in m
        for g in written[:1]
        for m in tomllib.loads((out / g["problem"] / "problem.toml").read_text())["provenance"]["models"]
    )
    made = add([out], tmp_path / "dataset")
    kept = [e.problem for e in made.entries if e.status == "kept"]
    assert kept, made.entries
    spec = tomllib.loads((tmp_path / "dataset" / kept[0] / "problem.toml").read_text())
    devices = {w["name"]: w["devices"] for w in spec["workloads"]}
    assert devices.pop("small") == ["cpu"] and all(d == ["cuda"] for d in devices.values()), devices
