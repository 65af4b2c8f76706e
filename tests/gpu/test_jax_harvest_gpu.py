"""A JAX model harvested on a GPU (issue 48: JAX problems at real sizes): its weights and
primitives on the GPU, each candidate checked there, and the dataset's assembly giving the
recorded shapes to the GPU alone and a CPU-sized workload to machines without one."""

from __future__ import annotations

import json
import os
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


@pytest.mark.skipif(not _gpus(), reason="JAX sees no GPU here")
def test_a_keras_backbone_s_cudnn_attention_is_written_and_its_blocks_with_it(tmp_path) -> None:
    """KerasHub runs its attention on a GPU as cuDNN's fused primitive (stop 72: Llama 2 7B,
    Mistral 7B and Gemma 2B at their published sizes); it is written as jax.nn's portable
    attention, checked on the GPU, and the attention block and the whole layer that hold it are
    written at level 4. Assembled, each passes the CPU's check at a workload smaller than the
    recorded one (its sizes read from the model traced at half its sizes: dataset/jax_sizes.py)."""
    os.environ.setdefault("KERAS_BACKEND", "jax")  # as `harvest jax:keras:...` sets it: keras_hub imports
    pytest.importorskip("keras_hub")
    out = tmp_path / "keras-llama"
    model = "jax:keras:LlamaBackbone,hidden_dim=512,intermediate_dim=1376,num_query_heads=8,num_key_value_heads=4"
    ran = CliRunner().invoke(
        app,
        ["harvest", model, "--device", "cuda", "--seq", "1024", "--repeats", "1"]
        + ["--min-share", "0", "--dtype", "bfloat16", "-o", str(out)],
    )
    assert ran.exit_code == 0, ran.output
    groups = json.loads((out / "harvest.json").read_text())["groups"]
    attention = [g for g in groups if g["op"] == "jax.nn.dot_product_attention"]
    assert attention and all(g["status"] == "written" for g in attention), attention
    reference = (out / attention[0]["problem"] / "reference.py").read_text()
    assert "jax.nn.dot_product_attention(" in reference and "MaskType" not in reference
    blocks = [g for g in groups if g["kind"] != "op" and g["status"] == "written" and g["level"] == 4]
    assert blocks, [(g["op"], g["status"], g["reasons"]) for g in groups if g["kind"] != "op"]
    made = add([out], tmp_path / "dataset")
    for block in blocks:
        entry = next(e for e in made.entries if e.problem == block["problem"])
        assert entry.status == "kept", (block["op"], entry.reasons)
        spec = tomllib.loads((tmp_path / "dataset" / block["problem"] / "problem.toml").read_text())
        sizes = {w["name"]: w["axes"] for w in spec["workloads"]}
        recorded = next(axes for name, axes in sizes.items() if name != "small")
        assert sum(sizes["small"].values()) < sum(recorded.values()), sizes  # smaller, and it passed
        assert "S = _sizes(" in (out / block["problem"] / "reference.py").read_text()
