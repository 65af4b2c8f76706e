"""Whole layers from published configs (issue 48): the generator writes the shipped files again
byte for byte, every problem loads with a CPU workload and speed-of-light formulas, the configs
are the published ones, a few small ones pass `gpuarena check`, and the pieces compute what the
architectures say (a sliding window, the KV cache's decode step)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch

from gpuarena.dataset import layer_ops
from gpuarena.dataset.assemble import Dataset
from gpuarena.dataset.layer_configs import ARCHS
from gpuarena.dataset.layers import LAYERS, WEIGHT, write
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "dataset" / "layers"
"""Their own problem root: dataset/problems is what the suite's shipped baselines time, all of it."""


def _shipped() -> dict[str, Path]:
    return {f"{p.parent.name}/{p.name}": p for p in sorted(DATASET.glob("level*/layer-*"))}


def test_the_generator_writes_the_shipped_problems_again_byte_for_byte(tmp_path):
    written = write(tmp_path)
    shipped = _shipped()
    assert {f"{f.parent.name}/{f.name}" for f in written} == set(shipped)
    for folder in written:
        twin = shipped[f"{folder.parent.name}/{folder.name}"]
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in twin.iterdir())
        for file in folder.iterdir():
            assert file.read_bytes() == (twin / file.name).read_bytes(), f"{twin / file.name} differs"


def test_at_least_ten_architectures_and_25_distinct_problems_at_levels_3_and_4():
    shipped = _shipped()
    assert len(shipped) == len(LAYERS) >= 25
    assert {p.split("/")[0] for p in shipped} == {"level3", "level4"}
    assert len({layer.arch for layer in LAYERS}) >= 10
    # distinct computations: no two problems of one model share their inputs and their function
    kinds = [(layer.arch, layer.entry, tuple(layer.groups)) for layer in LAYERS]
    assert len(set(kinds)) == len(kinds)


def test_every_problem_loads_with_a_cpu_workload_formulas_and_its_published_config():
    for folder in _shipped().values():
        spec = load_problem(folder).spec
        assert spec.level in (3, 4) and spec.weight == WEIGHT and "published-config" in spec.tags
        assert any(w.devices == ["cpu"] for w in spec.workloads)  # for machines without a GPU: a GPU scores real sizes
        assert any(w.devices == ["cuda"] for w in spec.workloads)
        for workload in spec.workloads:
            moved, flops = spec.cost(workload)
            assert moved and moved > 0 and flops and flops > 0
        assert "published config, not a harvest measurement" in spec.provenance.models[0]
        assert "import transformers" not in (folder / "reference.py").read_text()


def _real(name: str) -> dict[str, int]:
    spec = tomllib.loads((DATASET / name / "problem.toml").read_text())
    return next(w["axes"] for w in spec["workloads"] if w["devices"] == ["cuda"])


def test_the_configs_are_the_published_ones():
    qwen = ARCHS["qwen2_5-7b"].published
    assert (qwen["hidden_size"], qwen["num_attention_heads"], qwen["num_key_value_heads"]) == (3584, 28, 4)
    assert qwen["intermediate_size"] == 18944
    axes = _real("level4/layer-qwen2_5-7b-decoder")
    names = ("hidden", "heads", "kv_heads", "head_dim", "inter")
    assert [axes[n] for n in names] == [3584, 28, 4, 128, 18944]

    llama = _real("level4/layer-llama3-8b-decoder")
    assert (llama["hidden"], llama["heads"], llama["kv_heads"], llama["inter"]) == (4096, 32, 8, 14336)
    assert ARCHS["llama3-8b"].cfg["rope_theta"] == 500000.0 and ARCHS["llama3-8b"].cfg["eps"] == 1e-5

    deepseek = ARCHS["deepseek-v3"]
    assert deepseek.published["q_lora_rank"] == 1536 and deepseek.published["kv_lora_rank"] == 512
    axes = _real("level4/layer-deepseek-v3-decoder")
    assert [axes[n] for n in ("hidden", "heads", "q_rank", "kv_rank", "experts")] == [7168, 128, 1536, 512, 256]
    assert axes["kv_a_dim"] == 512 + 64 and axes["qk_dim"] == 128 + 64 and axes["moe_inter"] == 2048
    assert (deepseek.cfg["top_k"], deepseek.cfg["n_group"], deepseek.cfg["topk_group"]) == (8, 8, 4)

    mixtral = _real("level3/layer-mixtral-8x7b-moe")
    assert (mixtral["experts"], mixtral["moe_inter"], ARCHS["mixtral-8x7b"].cfg["top_k"]) == (8, 14336, 2)
    gemma = ARCHS["gemma2-9b"].cfg
    assert (gemma["head_dim"], gemma["softcap"], gemma["query_scale"]) == (256, 50.0, 256)
    # the small workloads keep the structure: query heads per KV head, head size
    for arch in ARCHS.values():
        if "kv_heads" in arch.full:
            assert arch.full["heads"] // arch.full["kv_heads"] == arch.small["heads"] // arch.small["kv_heads"]
            assert arch.full["head_dim"] == arch.small["head_dim"]


@pytest.mark.parametrize(
    "problem",
    ["level3/layer-bert-base-ffn", "level3/layer-llama3-8b-attention-decode", "level3/layer-mixtral-8x7b-moe"],
)
def test_small_ones_pass_check_on_the_cpu(problem):
    report = check_problem(DATASET / problem)
    assert report.ok, report.errors


def test_a_sliding_window_longer_than_the_sequence_is_plain_causal_attention_and_a_short_one_is_not():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 32, 16, generator=g) for _ in range(3))
    causal = layer_ops.attend(q, k[:, :2], v[:, :2], 0.25, {})
    assert torch.equal(layer_ops.attend(q, k[:, :2], v[:, :2], 0.25, {}, window=32), causal)
    windowed = layer_ops.attend(q, k[:, :2], v[:, :2], 0.25, {}, window=8)
    assert torch.equal(windowed[:, :, :8], causal[:, :, :8])  # the first 8 queries see every key anyway
    assert not torch.allclose(windowed[:, :, 8:], causal[:, :, 8:])


def test_a_decode_step_over_the_cache_is_the_last_row_of_the_prefill():
    """The decode attention with the prefill's keys and values as its cache gives the prefill's
    last token (RoPE at the cache's end), and returns the new token's key and value."""
    folder = DATASET / "level3" / "layer-llama3-8b-attention-decode"
    module = load_problem(folder).module
    axes = {"batch": 1, "seq": 9, "hidden": 512, "heads": 4, "kv_heads": 1, "head_dim": 128, "context": 1}
    p = module.make_inputs(axes, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(0))
    cfg = module.CONFIG
    full = layer_ops.self_attention({k: v for k, v in p.items() if "cache" not in k}, p["x"], cfg)
    # the first 8 tokens' keys and values, as the prefill rotates them
    cos, sin = layer_ops.rope_tables(torch.arange(8), 128, cfg)
    keys = layer_ops.rotate(layer_ops.heads(torch.nn.functional.linear(p["x"][:, :8], p["wk"]), 1), cos, sin)
    values = layer_ops.heads(torch.nn.functional.linear(p["x"][:, :8], p["wv"]), 1)
    step = {**p, "x": p["x"][:, 8:], "k_cache": keys, "v_cache": values}
    out, k_new, v_new = module.reference(**step)
    torch.testing.assert_close(out, full[:, 8:], rtol=1e-4, atol=1e-4)
    assert k_new.shape == v_new.shape == (1, 1, 1, 128)


def test_written_into_a_dataset_they_are_listed_in_its_index_and_replaced_on_a_rewrite(tmp_path):
    index = Dataset(harvests=["gpuarena harvest x"], kept=0, left_out=0, left_out_share=0.0, entries=[])
    (tmp_path / "dataset.json").write_text(index.model_dump_json())
    write(tmp_path, LAYERS[:2])
    write(tmp_path, LAYERS[:2])
    listed = Dataset.model_validate_json((tmp_path / "dataset.json").read_text())
    assert listed.kept == 2 and listed.harvests == ["gpuarena harvest x"]
    assert {e.problem for e in listed.entries} == {f"level{x.level}/{x.name}" for x in LAYERS[:2]}
    assert all(e.weight == WEIGHT and e.harvests == ["published config Llama-3-8B"] for e in listed.entries)
