"""Level-2 fusions from published configs (issue 48): the generator writes the shipped files again
byte for byte, at least 30 distinct computations none of them a norm, every problem loads with a
CPU workload and cost formulas, level 2's op families stay under a third with the harvests' 22,
a few small ones pass `gpuarena check`, and the pieces compute what the architectures say (the
soft cap's bound, rotary as a complex multiply, the routers' experts, merged attention states,
AWQ's packing, RWKV's WKV, the MoE dispatch and combine)."""

from __future__ import annotations

import ast
import math
from collections import Counter
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gpuarena.dataset import fusion_ops, fusion_ops_pick, fusion_ops_seq
from gpuarena.dataset.assemble import Dataset
from gpuarena.dataset.distinct import DOMINANT_SHARE, kind
from gpuarena.dataset.fusion_models import MODELS
from gpuarena.dataset.fusions import FUSIONS, families, operator, write
from gpuarena.dataset.layers import WEIGHT
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem

REPO = Path(__file__).resolve().parents[2]
DATASET = REPO / "dataset" / "layers"
HARVESTED_LEVEL2 = {"distinct": 22, "norm": 17}
"""The harvests' level 2 (bench/results/dataset-distinct-with-next-harvests-cpu-vm-2026-11-30.txt):
22 distinct computations, 17 of them norms; the other five, at worst, all in one family."""


def _shipped() -> dict[str, Path]:
    return {f"{p.parent.name}/{p.name}": p for p in sorted(DATASET.glob("level*/fusion-*"))}


def test_the_generator_writes_the_shipped_problems_again_byte_for_byte(tmp_path):
    written = write(tmp_path)
    shipped = _shipped()
    assert {f"{f.parent.name}/{f.name}" for f in written} == set(shipped)
    for folder in written:
        twin = shipped[f"{folder.parent.name}/{folder.name}"]
        assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in twin.iterdir())
        for file in folder.iterdir():
            assert file.read_bytes() == (twin / file.name).read_bytes(), f"{twin / file.name} differs"


def test_at_least_30_distinct_level_2_computations_none_a_norm():
    shipped = _shipped()
    assert len(shipped) == len(FUSIONS) >= 30
    assert {p.split("/")[0] for p in shipped} == {"level2"}
    # one piece each: no computation twice on other shapes or under another model's name
    assert len({f.entry for f in FUSIONS}) == len(FUSIONS)
    assert len({f.model for f in FUSIONS}) >= 20 and {f.model for f in FUSIONS} <= set(MODELS)
    assert not [f.name for f in FUSIONS if kind(operator(f), 2) == "norm" or "norm" in f.entry]


def test_level_2_op_families_stay_under_a_third_with_the_harvested_ones():
    """By distinct.kind (the measure of `gpuarena dataset distinct`), the harvests' 17 norms and
    five others (at worst all in one family of these) among 22 + 40; and by the coarse families
    the list names, where each router, sampler or quantizer is not a family of its own."""
    kinds = Counter(kind(operator(f), 2) for f in FUSIONS)
    total = HARVESTED_LEVEL2["distinct"] + len(FUSIONS)
    others = HARVESTED_LEVEL2["distinct"] - HARVESTED_LEVEL2["norm"]
    assert HARVESTED_LEVEL2["norm"] + kinds["norm"] <= DOMINANT_SHARE * total
    assert max(kinds.values()) + others <= DOMINANT_SHARE * total
    coarse = families()
    assert len(coarse) >= 8 and max(coarse.values()) + others <= DOMINANT_SHARE * total
    assert kinds["rotary"] == coarse["rotary"] and kinds["attention"] == coarse["attention"]


def test_every_problem_loads_with_a_cpu_workload_formulas_and_its_published_config():
    allowed = {"__future__", "math", "typing", "torch", "torch.nn.functional"}
    for folder in _shipped().values():
        spec = load_problem(folder).spec
        assert spec.level == 2 and spec.weight == WEIGHT and {"fusion", "published-config"} <= set(spec.tags)
        assert any(w.devices == ["cpu"] for w in spec.workloads)  # for machines without a GPU: a GPU scores real sizes
        assert any(w.devices == ["cuda"] for w in spec.workloads)
        for workload in spec.workloads:
            moved, flops = spec.cost(workload)
            assert moved and moved > 0 and flops is not None and flops >= 0
        assert "published config, not a harvest measurement" in spec.provenance.models[0]
        tree = ast.parse((folder / "reference.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert imported <= allowed, folder.name


@pytest.mark.parametrize(
    "problem",
    [
        "fusion-deepseek-v3-router-grouped",
        "fusion-llama3-8b-instruct-sampling-top-p",
        "fusion-deepseek-v3-fp8-quantize-group",
        "fusion-qwen2_5-7b-instruct-awq-dequantize",
        "fusion-mamba-2_8b-selective-scan",
        "fusion-qwen3-30b-a3b-moe-permute",
    ],
)
def test_small_ones_pass_check_on_the_cpu(problem):
    report = check_problem(DATASET / "level2" / problem)
    assert report.ok, report.errors


@pytest.mark.slow
def test_no_two_are_one_computation_on_other_shapes():
    """The family keys of `gpuarena dataset distinct` (the graphs, shapes left out): 40 of 40."""
    from gpuarena.dataset.distinct import identities
    from gpuarena.problems.loader import discover

    problems = [p for p in discover(DATASET) if p.spec.name.startswith("fusion-")]
    assert len({one.family for one in identities(problems)}) == len(problems) == len(FUSIONS)


def test_soft_caps_bound_the_logits_and_leave_small_ones_nearly_alone():
    logits = torch.tensor([[-1000.0, -30.0, -0.3, 0.0, 0.3, 30.0, 1000.0]])
    capped = fusion_ops_pick.final_logit_softcap({"logits": logits}, {"final_logit_softcapping": 30.0})
    assert bool((capped.abs() <= 30.0).all()) and capped[0, 0] == -30.0 and capped[0, -1] == 30.0
    assert torch.allclose(capped[0, 2:5], logits[0, 2:5], atol=1e-4)
    scores = torch.randn(1, 2, 6, 6) * 1e4
    probs = fusion_ops_seq.softcap_causal_softmax(
        {"scores": scores}, {"query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0}
    )
    assert torch.allclose(probs.sum(-1), torch.ones(1, 2, 6)) and bool((probs.triu(1) == 0).all())


def test_rotary_embeddings_are_complex_multiplies_by_the_position_angles():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 5, 2, 256, generator=g), torch.randn(1, 5, 2, 256, generator=g)
    cfg = {"rotary_dim": 64, "rope_theta": 10000.0}
    turned, _ = fusion_ops_seq.rotary_interleaved_partial({"query": q, "key": k}, cfg)
    angles = torch.arange(5.0)[:, None] * 10000.0 ** (-torch.arange(0, 64, 2) / 64)
    pairs = torch.view_as_complex(q[..., :64].unflatten(-1, (-1, 2)).contiguous())
    expected = torch.view_as_real(pairs * torch.polar(torch.ones_like(angles), angles)[:, None]).flatten(-2)
    torch.testing.assert_close(turned[..., :64], expected, rtol=1e-5, atol=1e-5)
    assert torch.equal(turned[..., 64:], q[..., 64:])
    # by halves (Llama, vLLM's cache): x[i] + i x[i + d/2] turned by the cache's angle
    positions = torch.tensor([3, 0, 7])
    turns = torch.rand(8, 64, generator=g) * 6.28
    cache = torch.cat([turns.cos(), turns.sin()], -1)
    x = torch.randn(3, 128, generator=g)
    out, _ = fusion_ops_seq.rotary_cached_qk(
        {"positions": positions, "query": x, "key": x, "cos_sin_cache": cache}, {"head_dim": 128}
    )
    halves = torch.complex(x[:, :64], x[:, 64:]) * torch.polar(torch.ones(3, 64), turns[positions])
    torch.testing.assert_close(out, torch.cat([halves.real, halves.imag], -1), rtol=1e-5, atol=1e-5)


def test_llama3_scaling_keeps_short_wavelengths_and_divides_long_ones():
    cfg = {
        "head_dim": 128,
        "rope_theta": 500000.0,
        "rope_scaling": {
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    }
    x = torch.zeros(1, 1, 1, 128)
    x[..., :64] = 1.0  # cos and sin of every angle
    position = {"position_ids": torch.tensor([[1000]])}
    out, _ = fusion_ops_seq.rotary_llama3_scaled({"query": x, "key": x, **position}, cfg)
    inv = 500000.0 ** (-torch.arange(0, 128, 2) / 128)
    angle = torch.atan2(out[0, 0, 0, 64:], out[0, 0, 0, :64])
    expected = torch.remainder(1000 * inv + math.pi, 2 * math.pi) - math.pi
    assert torch.allclose(angle[:5], expected[:5], atol=1e-3)  # wavelengths under 2048: kept
    long = torch.remainder(1000 * inv[-5:] / 8 + math.pi, 2 * math.pi) - math.pi
    assert torch.allclose(angle[-5:], long, atol=1e-3)  # over 8192: divided by 8


def test_the_routers_pick_the_experts_the_architectures_say():
    folder = DATASET / "level2" / "fusion-deepseek-v3-router-grouped"
    module = load_problem(folder).module
    p = module.make_inputs({"tokens": 32, "experts": 256}, torch.float32, "cpu", torch.Generator().manual_seed(3))
    weights, ids = module.reference(**p)
    choice = p["logits"].sigmoid() + p["bias"]
    for token in range(32):  # by hand: groups by their two best, the best four groups, the best eight in them
        by_group = choice[token].view(8, 32)
        groups = by_group.topk(2, -1).values.sum(-1).topk(4).indices
        candidates = [(float(by_group[g, e]), int(g) * 32 + e) for g in groups for e in range(32)]
        assert {e for _, e in sorted(candidates, reverse=True)[:8]} == set(ids[token].tolist())
    assert torch.allclose(weights.sum(-1), torch.full((32,), 2.5))
    # the selection bias changes choices; without the groups the choice would differ too
    unbiased = module.reference(bias=torch.zeros(256), logits=p["logits"])[1]
    assert not torch.equal(unbiased, ids)
    assert not torch.equal(choice.topk(8, -1).indices.sort(-1).values, ids.sort(-1).values)
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.5, 0.0, 0.2, 0.3, -0.5]])
    w, top = fusion_ops_pick.router_topk_rescale({"logits": logits}, {"top_k": 2})
    assert top.tolist() == [[1, 3]] and torch.allclose(w, torch.tensor([[1, math.exp(-0.5)]]) / (1 + math.exp(-0.5)))


def test_merged_attention_states_are_attention_over_all_the_keys():
    g = torch.Generator().manual_seed(1)
    q, k, v = (
        torch.randn(6, 2, 16, generator=g),
        torch.randn(6, 40, 16, generator=g),
        torch.randn(6, 40, 16, generator=g),
    )

    def partial(keys: slice) -> tuple[torch.Tensor, torch.Tensor]:
        s = torch.einsum("thd,tkd->thk", q, k[:, keys])
        return s.softmax(-1) @ v[:, keys], s.logsumexp(-1)

    (va, la), (vb, lb) = partial(slice(0, 25)), partial(slice(25, 40))
    out, lse = fusion_ops_seq.merge_attention_states({"v_a": va, "lse_a": la, "v_b": vb, "lse_b": lb}, {})
    full, full_lse = partial(slice(0, 40))
    torch.testing.assert_close(out, full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, full_lse)


def test_awq_unpacks_its_packing_order_and_dequantizes_per_group():
    g = torch.Generator().manual_seed(2)
    values, zeros = torch.randint(0, 16, (256, 16), generator=g), torch.randint(0, 16, (2, 16), generator=g)

    def pack(m: torch.Tensor) -> torch.Tensor:  # AWQ's GEMM layout: column order[i] of each eight in bits 4i
        words = torch.zeros(m.shape[0], m.shape[1] // 8, dtype=torch.int64)
        for i, column in enumerate([0, 2, 4, 6, 1, 3, 5, 7]):
            words |= m[:, column::8] << (4 * i)
        return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)

    scales = torch.rand(2, 16, generator=g, dtype=torch.float32).half()
    out = fusion_ops.dequantize_awq_int4(
        {"qweight": pack(values), "qzeros": pack(zeros), "scales": scales}, {"group_size": 128}
    )
    expected = (values - zeros.repeat_interleave(128, 0)).float() * scales.float().repeat_interleave(128, 0)
    assert torch.equal(out, expected.half())


def test_the_wkv_recurrence_is_its_weighted_average():
    g = torch.Generator().manual_seed(4)
    k, v = torch.randn(1, 12, 3, generator=g), torch.randn(1, 12, 3, generator=g)
    decay, first = torch.randn(3, generator=g), torch.randn(3, generator=g)
    out = fusion_ops_seq.wkv_recurrence({"time_decay": decay, "time_first": first, "key": k, "value": v}, {})
    w = torch.exp(decay)
    for t in range(12):
        past = torch.arange(t, dtype=torch.float32)[:, None]
        weights = torch.cat([torch.exp(k[0, :t] - (t - 1 - past) * w), torch.exp(first + k[0, t])[None]])
        expected = (weights * v[0, : t + 1]).sum(0) / weights.sum(0)
        torch.testing.assert_close(out[0, t], expected, rtol=1e-5, atol=1e-5)


def test_dispatch_then_combine_weighs_each_tokens_own_rows():
    g = torch.Generator().manual_seed(5)
    hidden, ids = torch.randn(10, 8, generator=g), torch.rand(10, 16, generator=g).argsort(-1)[:, :4]
    permuted, ends = fusion_ops_pick.moe_token_permute({"hidden": hidden, "expert_ids": ids, "experts": 16}, {})
    assert ends[-1] == 40 and torch.equal(
        ends.diff(prepend=ends.new_zeros(1)), torch.bincount(ids.flatten(), minlength=16)
    )
    order = torch.sort(ids.flatten(), stable=True).indices
    weights = torch.rand(10, 4, generator=g)
    combined = fusion_ops_pick.moe_unpermute_weighted_sum(
        {"expert_out": permuted, "order": order, "weights": weights}, {}
    )
    torch.testing.assert_close(combined, hidden * weights.sum(-1, keepdim=True))


def test_the_loss_and_the_sampling_filters_are_the_usual_ones():
    g = torch.Generator().manual_seed(6)
    logits, targets = torch.randn(9, 50, generator=g), torch.randint(0, 50, (9,), generator=g)
    targets[2] = -100
    loss = fusion_ops_pick.cross_entropy_per_token({"logits": logits, "targets": targets}, {})
    torch.testing.assert_close(loss, F.cross_entropy(logits, targets, reduction="none"))
    probs = fusion_ops_pick.sampling_top_p_probs({"logits": logits}, {"temperature": 0.6, "top_p": 0.9})
    full = (logits / 0.6).softmax(-1)
    for row in range(9):  # the fewest most likely tokens whose mass reaches 0.9
        kept = probs[row] > 0
        assert full[row][kept].sum() >= 0.9 and full[row][kept].sum() - full[row][kept].min() < 0.9
        assert float(full[row][kept].min()) >= float(torch.cat([full[row][~kept], torch.zeros(1)]).max())
    top = fusion_ops_pick.sampling_temperature_topk_probs({"logits": logits}, {"temperature": 0.7, "top_k": 20})
    assert bool(((top > 0).sum(-1) == 20).all()) and torch.allclose(top.sum(-1), torch.ones(9))


def test_written_into_a_dataset_they_are_listed_in_its_index_and_replaced_on_a_rewrite(tmp_path):
    index = Dataset(harvests=["gpuarena harvest x"], kept=0, left_out=0, left_out_share=0.0, entries=[])
    (tmp_path / "dataset.json").write_text(index.model_dump_json())
    write(tmp_path, FUSIONS[:2])
    write(tmp_path, FUSIONS[:2])
    listed = Dataset.model_validate_json((tmp_path / "dataset.json").read_text())
    assert listed.kept == 2 and listed.harvests == ["gpuarena harvest x"]
    assert {e.problem for e in listed.entries} == {f"level2/{f.name}" for f in FUSIONS[:2]}
    assert all(e.weight == WEIGHT and e.harvests[0].startswith("published config ") for e in listed.entries)
