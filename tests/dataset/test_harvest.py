"""The harvester on the CPU: the recorder sees a model's ops with shapes, groups weigh to 1,
written problems load and pass `gpuarena check`, degenerate ones are rejected with reasons, and
the command is reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset.harvest import Harvest, group_calls, harvest
from gpuarena.dataset.models import build
from gpuarena.dataset.record import record
from gpuarena.harness.problem_check import check_problem
from gpuarena.harness.session import as_outputs
from gpuarena.problems import load_problem

TINY = "llama:dim=32,layers=1,heads=2,vocab=64,ffn=64"


def shapes(call, name):
    return next(a.tensor.shape for a in call.args if a.name == name)


def test_recorder_sees_the_ops_with_shapes():
    calls = record(build(TINY, "prefill", batch=2, seq=8, context=0).forward).calls
    ops = {c.op for c in calls}
    assert {
        "aten.embedding.default",
        "aten.mm.default",
        "aten._softmax.default",
        "aten.rsqrt.default",
        "aten.silu.default",
        "aten.bmm.default",
    } <= ops
    mms = [c for c in calls if c.op == "aten.mm.default"]
    assert [16, 32] in [shapes(c, "self") for c in mms]  # batch x seq tokens of width dim
    softmax = next(c for c in calls if c.op == "aten._softmax.default")
    assert shapes(softmax, "self") == [2, 2, 8, 8] and softmax.args[1].value == -1
    assert next(c for c in calls if c.op == "aten.t.default").metadata_only
    assert not mms[0].metadata_only and all(c.seconds >= 0 for c in calls)


def test_decode_attends_over_the_cache():
    calls = record(build(TINY, "decode", batch=2, seq=0, context=12).forward).calls
    softmax = next(c for c in calls if c.op == "aten._softmax.default")
    assert shapes(softmax, "self") == [2, 2, 1, 13]  # one new token against 12 cached + itself
    assert any(c.op == "aten.cat.default" for c in calls)


def test_groups_count_calls_per_forward_and_shares_sum_to_one():
    calls = record(build(TINY, "prefill", batch=1, seq=4, context=0).forward, repeats=2).calls
    groups = group_calls(calls, repeats=2)
    assert sum(g.share for g, _ in groups) == pytest.approx(1.0)
    assert sum(g.calls for g, _ in groups) * 2 == len(calls)
    assert len({g.name for g, _ in groups}) == len(groups)


def test_written_problems_load_and_pass_check(tmp_path: Path):
    work = build(TINY, "prefill", batch=2, seq=8, context=0)
    result = harvest(
        work.forward, tmp_path, model=TINY, phase="prefill", sizes=work.sizes, command="test", min_share=0.0, repeats=1
    )
    written = [g for g in result.groups if g.status == "written"]
    assert written and {"aten.mm.default", "aten._softmax.default"} <= {g.op for g in written}
    for group in written:
        problem = load_problem(tmp_path / group.problem)
        assert problem.spec.level == 1 and group.op in problem.spec.tags
        assert problem.spec.provenance.operator == group.op
        assert f"{group.calls} call(s) a forward" in problem.spec.provenance.models[0]
        assert check_problem(tmp_path / group.problem).ok
    assert not list(tmp_path.glob(".candidates"))
    assert all(g.problem is None for g in result.groups if g.status != "written")


def test_degenerate_candidates_are_rejected_with_reasons(tmp_path: Path):
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(0))

    def forward():
        return torch.zeros_like(x), x.clone(), torch.softmax(x, dim=-1)

    result = harvest(
        forward, tmp_path, model="toy", phase="prefill", sizes={"batch": 1}, command="test", min_share=0.0, repeats=1
    )
    status = {g.op: g for g in result.groups}
    assert status["aten._softmax.default"].status == "written"
    assert status["aten.zeros_like.default"].status == "rejected"
    assert any("constant" in r for r in status["aten.zeros_like.default"].reasons)
    assert status["aten.clone.default"].status == "rejected"
    assert any("unchanged passes" in r for r in status["aten.clone.default"].reasons)
    saved = Harvest.model_validate_json((tmp_path / "harvest.json").read_text())
    assert saved.rejected == 2 and saved.written == 1
    rejected = [g for g in saved.groups if g.status == "rejected"]
    assert saved.rejected_share == pytest.approx(sum(g.share for g in rejected))
    assert sorted(p.name.split("-")[0] for p in (tmp_path / "level1").iterdir()) == ["softmax"]


def test_a_candidate_that_repeats_a_dataset_problem_is_left_out(tmp_path: Path):
    """The same op on the same shapes as a problem of --against (level1/softmax's small-64x1000)
    is a duplicate, not written; a new shape of the same op is written."""
    from gpuarena.bundled import bundled_root

    gen = torch.Generator().manual_seed(0)
    known, new = torch.randn(64, 1000, generator=gen), torch.randn(48, 200, generator=gen)

    def forward():
        return torch.softmax(known, dim=-1), torch.softmax(new, dim=-1)

    result = harvest(
        forward,
        tmp_path,
        model="toy",
        phase="prefill",
        sizes={"batch": 1},
        command="test",
        min_share=0.0,
        repeats=1,
        against=[bundled_root()],
    )
    by_status = {g.status: g for g in result.groups}
    assert set(by_status) == {"duplicate", "written"} and result.duplicates == 1 and result.written == 1
    assert by_status["duplicate"].reasons == ["repeats level1/softmax (small-64x1000): the same op on the same shapes"]
    assert by_status["duplicate"].problem is None and len(list((tmp_path / "level1").iterdir())) == 1
    assert result.against == [str(bundled_root())]
    alone = harvest(
        forward,
        tmp_path / "alone",
        model="toy",
        phase="prefill",
        sizes={"batch": 1},
        command="test",
        min_share=0.0,
        repeats=1,
    )  # compared with nothing: both written
    assert alone.written == 2 and alone.duplicates == 0 and alone.against == []


TIMINGS = ("seconds", "share", "total_seconds", "rejected_share")


def without_timings(data):
    if isinstance(data, dict):
        return {k: without_timings(v) for k, v in data.items() if k not in TIMINGS}
    if isinstance(data, list):
        return [without_timings(v) for v in data]
    return data


def test_cli_end_to_end_and_reproducible(tmp_path: Path):
    out = tmp_path / "harvest"
    args = [
        "harvest",
        TINY,
        "--phase",
        "decode",
        "--batch",
        "2",
        "--context",
        "16",
        "--min-share",
        "0",
        "--repeats",
        "1",
        "--no-dedupe",
        "-o",
        str(out),
    ]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "problems" in first.output
    saved = json.loads((out / "harvest.json").read_text())
    assert saved["command"].startswith(f"gpuarena harvest {TINY} --phase decode --batch 2 --context 16")
    assert "--no-dedupe" in saved["command"] and saved["against"] == []
    assert saved["sizes"] == {"batch": 2, "context": 16} and saved["seed"] == 0
    lines = (out / "profile.jsonl").read_text().splitlines()
    assert len(lines) == saved["calls"] and json.loads(lines[0])["op"].startswith("aten.")
    problems = sorted(p for level in out.glob("level*") for p in level.iterdir())  # ops, and modules' graphs
    assert len(problems) == saved["written"] > 0 and (out / "level1").is_dir() and (out / "level2").is_dir()
    assert all(check_problem(p).ok for p in problems[:3])
    reference = (problems[0] / "reference.py").read_text()
    again = CliRunner().invoke(app, args)  # same command, same folder: replaced
    assert again.exit_code == 0, again.output
    assert without_timings(json.loads((out / "harvest.json").read_text())) == without_timings(saved)
    assert sorted(p for level in out.glob("level*") for p in level.iterdir()) == problems
    assert (problems[0] / "reference.py").read_text() == reference


def test_cli_refuses_a_folder_that_is_not_a_harvest(tmp_path: Path):
    (tmp_path / "keep.txt").write_text("mine")
    result = CliRunner().invoke(app, ["harvest", TINY, "-o", str(tmp_path), "--seq", "4"])
    assert result.exit_code == 2 and (tmp_path / "keep.txt").exists()


def test_unknown_model_is_an_error(tmp_path: Path):
    result = CliRunner().invoke(app, ["harvest", "gpt-17", "-o", str(tmp_path / "x")])
    assert result.exit_code == 2 and "unknown model" in result.output


def test_hf_model_specs_name_sizes_and_refuse_unknown_ones():
    from gpuarena.dataset.models import parse_hf
    from gpuarena.errors import GpuarenaError

    assert parse_hf("LlamaForCausalLM") == ("LlamaForCausalLM", False, {})
    assert parse_hf("MistralForCausalLM:size=full,num_hidden_layers=4,rms_norm_eps=1e-6") == (
        "MistralForCausalLM",
        True,
        {"num_hidden_layers": 4, "rms_norm_eps": 1e-6},
    )
    for bad, words in [("X:size=huge", "use full"), ("X:layers", "key=value"), ("X:hidden_size=big", "not a number")]:
        with pytest.raises(GpuarenaError, match=words):
            parse_hf(bad)
    pytest.importorskip("transformers")
    with pytest.raises(GpuarenaError, match="has no 'n_layers'"):
        build("hf:LlamaForCausalLM:n_layers=2", "prefill", batch=1, seq=4, context=0)


def test_transformers_models_decoder_and_vision_record_their_real_shapes():
    pytest.importorskip("transformers")
    # the sizes given win over the tiny ones, and the head size follows (the config's constructor derives it)
    llama = build(
        "hf:LlamaForCausalLM:hidden_size=96,num_attention_heads=6,num_key_value_heads=2",
        "prefill",
        batch=2,
        seq=8,
        context=0,
    )
    mms = [c for c in record(llama.forward).calls if c.op == "aten.mm.default"]
    assert [16, 96] in [shapes(c, "self") for c in mms]  # 2 x 8 tokens of width 96
    assert [16, 2 * 16] in [c.outputs[0].shape for c in mms]  # k and v: 2 kv heads of 16
    # a vision model takes pixels; size=full keeps ViT-Base's own sizes (768 wide, 16 x 16 patches of 224 x 224)
    vit = build("hf:ViTForImageClassification:size=full,num_hidden_layers=1", "prefill", batch=1, seq=1, context=0)
    assert vit.sizes == {"batch": 1, "image_size": 224}
    calls = record(vit.forward).calls
    conv = next(c for c in calls if c.op == "aten.convolution.default")
    assert shapes(conv, "input") == [1, 3, 224, 224] and conv.outputs[0].shape == [1, 768, 14, 14]


def test_the_kernel_timer_says_so_when_no_kernel_ran():
    from gpuarena.dataset.record import KernelTimer
    from gpuarena.errors import GpuarenaError

    with pytest.raises(GpuarenaError, match="no kernel"):
        record(build(TINY, "prefill", batch=1, seq=4, context=0).forward, timer=KernelTimer())


def test_a_candidate_that_kills_its_check_costs_only_its_own_verdict(tmp_path):
    """On a GPU a device-side assert spoils the process's CUDA context; the checker then starts a
    fresh process for the next candidate. A reference that exits its process stands in for it here."""
    import shutil

    from gpuarena.bundled import bundled_root
    from gpuarena.dataset.checker import DIED, CandidateChecker

    good, bad = tmp_path / "good", tmp_path / "bad"
    shutil.copytree(bundled_root() / "level1" / "softmax", good)
    shutil.copytree(good, bad)
    (bad / "reference.py").write_text((bad / "reference.py").read_text() + "\nimport os\nos._exit(3)\n")
    with CandidateChecker("cpu", isolate=True) as checker:
        assert checker(good).ok
        assert checker(bad).errors == [DIED]
        assert checker(good).ok and checker.restarts == 1


def test_offsets_are_redrawn_sorted_and_several_results_keep_their_tensors(tmp_path):
    from gpuarena.dataset import candidate

    offsets, values = torch.tensor([0, 3, 3, 7, 9]), torch.tensor([1, 8, 2])
    (call,) = record(lambda: torch.ops.aten.searchsorted.Tensor(offsets, values)).calls
    assert call.args[0].tensor.ascending and not call.args[1].tensor.ascending
    problem = load_problem(candidate.write(tmp_path / "p", call, "searchsorted", "searchsorted", 1.0, [], []))
    workload = problem.spec.workloads[0]
    for seed in range(5):
        inputs = problem.make_inputs(
            dict(workload.axes), workload.torch_dtype, torch.device("cpu"), torch.Generator().manual_seed(seed)
        )
        seq = inputs["sorted_sequence"]
        assert bool((seq[1:] >= seq[:-1]).all()) and int(seq[-1]) == 9
    # several results (aten.sort: values and indices) come back as the tensors recorded, in order
    x = torch.randn(8)
    (call,) = record(lambda: torch.ops.aten.sort.default(x)).calls
    problem = load_problem(candidate.write(tmp_path / "s", call, "sort", "sort", 1.0, [], []))
    inputs = problem.make_inputs(
        dict(problem.spec.workloads[0].axes),
        problem.spec.workloads[0].torch_dtype,
        torch.device("cpu"),
        torch.Generator().manual_seed(0),
    )
    values, indices = problem.reference(**inputs)
    assert torch.equal(values, inputs["x"][indices]) and indices.dtype == torch.int64


def test_a_sort_with_ties_is_written_as_a_stable_sort_so_its_indices_are_one_answer(tmp_path):
    """A MoE's expert ids sort with ties (8 values over many tokens): an unstable sort's indices
    are one order among many, and torch.compile's differed from eager's on an H200. The writer
    asks for the stable order, which every correct kernel can match; dim and descending are
    keyword-only there."""
    from gpuarena.dataset import candidate

    ids = torch.randint(0, 8, (64,))
    for op in (
        lambda: torch.ops.aten.sort.default(ids),
        lambda: torch.ops.aten.sort.default(ids, 0, True),
        lambda: torch.ops.aten.argsort.default(ids, 0, True),
    ):
        (call,) = record(op).calls
        folder = candidate.write(tmp_path / f"s{len(list(tmp_path.iterdir()))}", call, "sort", "sort", 1.0, [], [])
        assert ".stable(x, stable=True" in (folder / "reference.py").read_text()
        problem = load_problem(folder)
        inputs = problem.make_inputs(
            dict(problem.spec.workloads[0].axes),
            problem.spec.workloads[0].torch_dtype,
            torch.device("cpu"),
            torch.Generator().manual_seed(0),
        )
        x, descending = inputs["x"], len(call.args) > 2
        assert len(torch.unique(x)) < x.numel()  # ties, drawn as recorded
        stable = torch.sort(x, stable=True, descending=descending).indices
        assert torch.equal(as_outputs(problem.reference(**inputs))[-1], stable)


def test_attention_candidates_return_only_the_attention_output(tmp_path):
    from gpuarena.dataset import candidate

    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    calls = record(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)).calls
    call = next(c for c in calls if c.op.startswith("aten._scaled_dot_product_"))
    assert len(call.outputs) > 1  # the op's log-sum-exp (and on a GPU its RNG state) come back too
    folder = candidate.write(tmp_path / "attn", call, "attn", "attention", 1.0, [], [])
    problem = load_problem(folder)
    assert problem.spec.outputs == ["output"]
    assert check_problem(folder).ok, check_problem(folder).errors
    inputs = problem.make_inputs(
        dict(problem.spec.workloads[0].axes),
        problem.spec.workloads[0].torch_dtype,
        torch.device("cpu"),
        torch.Generator().manual_seed(0),
    )
    expected = torch.nn.functional.scaled_dot_product_attention(
        inputs["query"], inputs["key"], inputs["value"], is_causal=True
    )
    torch.testing.assert_close(problem.reference(**inputs), expected)


def test_harvest_of_a_scaled_down_transformers_model_from_the_command_line(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "mixtral"
    result = CliRunner().invoke(
        app,
        [
            "harvest",
            "hf:MixtralForCausalLM:num_local_experts=4,num_experts_per_tok=2",
            "--seq",
            "16",
            "--min-share",
            "0.02",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = Harvest.model_validate_json((out / "harvest.json").read_text())
    assert report.model == "hf:MixtralForCausalLM:num_local_experts=4,num_experts_per_tok=2" and report.written > 0
    assert "--dtype float32" in report.command
    for group in report.groups:
        if group.status == "written":
            assert check_problem(out / group.problem).ok


def test_offsets_that_end_at_a_size_follow_that_size_in_a_smaller_workload(tmp_path):
    """A mixture of experts' _grouped_mm: offs are the cumulative rows of each expert and end at
    the rows of x; a smaller workload's offsets must end at its own rows."""
    from gpuarena.dataset import candidate

    x, w, offs = torch.randn(16, 8), torch.randn(4, 8, 8), torch.tensor([3, 3, 10, 16], dtype=torch.int32)
    (call,) = [
        c for c in record(lambda: torch._grouped_mm(x, w, offs=offs)).calls if c.op.startswith("aten._grouped_mm")
    ]
    problem = load_problem(candidate.write(tmp_path / "g", call, "grouped_mm", "grouped_mm", 1.0, [], []))
    axes = dict(problem.spec.workloads[0].axes)
    assert axes["x_0"] == 16 and problem.module.INPUTS["offs"]["high_axis"] == "x_0"
    inputs = problem.make_inputs(
        {**axes, "x_0": 40}, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    assert int(inputs["offs"][-1]) == 40 and bool((inputs["offs"][1:] >= inputs["offs"][:-1]).all())
    assert problem.reference(**inputs).shape == (40, 8)


def test_a_transposed_input_drawn_smaller_keeps_its_layout_in_a_storage_of_its_own_size(tmp_path):
    """A weight recorded transposed (strides 1 and its rows) keeps that layout in a smaller
    workload, packed at that workload's size: drawn through the recorded strides, Mixtral's
    experts at 8 x 40 x 48 drew a storage of 822 million numbers (9 s a draw on the 2-core VM)."""
    from gpuarena.dataset import candidate

    weight = torch.randn(64, 32).t()  # [32, 64] with strides (1, 32)
    x = torch.randn(16, 32)
    (call,) = [c for c in record(lambda: torch.mm(x, weight)).calls if c.op == "aten.mm.default"]
    problem = load_problem(candidate.write(tmp_path / "t", call, "mm", "mm", 1.0, [], []))
    spec = problem.module.INPUTS["mat2"]
    assert spec["stride"] == [1, 32]
    axes = dict(problem.spec.workloads[0].axes)
    generator = torch.Generator().manual_seed(0)
    full = problem.make_inputs(axes, torch.float32, torch.device("cpu"), generator)["mat2"]
    assert full.stride() == (1, 32) and full.untyped_storage().nbytes() == 32 * 64 * 4
    small = problem.make_inputs(
        {**axes, "x_1": 8, "mat2_0": 8, "mat2_1": 4}, torch.float32, torch.device("cpu"), generator
    )
    assert small["mat2"].shape == (8, 4) and small["mat2"].stride() == (1, 8)
    assert small["mat2"].untyped_storage().nbytes() == 8 * 4 * 4
    assert problem.reference(**small).shape == (16, 4)


def test_indices_stay_below_the_size_they_index_in_a_smaller_workload(tmp_path):
    from gpuarena.dataset import candidate

    table, rows = torch.randn(300, 8), torch.tensor([5, 290, 17, 0])
    (call,) = [
        c for c in record(lambda: torch.ops.aten.index.Tensor(table, [rows])).calls if c.op == "aten.index.Tensor"
    ]
    problem = load_problem(candidate.write(tmp_path / "i", call, "index", "index", 1.0, [], []))
    assert problem.module.INPUTS["indices_0"]["below_axis"] == "x_0"
    axes = dict(problem.spec.workloads[0].axes)
    for size, seed in ((300, 0), (40, 1)):
        inputs = problem.make_inputs(
            {**axes, "x_0": size}, torch.float32, torch.device("cpu"), torch.Generator().manual_seed(seed)
        )
        assert int(inputs["indices_0"].max()) < size and problem.reference(**inputs).shape == (4, 8)
    assert check_problem(problem.path).ok


def test_a_transformers_decoder_decodes_against_the_same_context_every_forward():
    """hf decode: the context is prefilled once, and each recorded forward attends over it plus
    its one new token, however many forwards ran before (the cache is cut back each time)."""
    pytest.importorskip("transformers")
    workload = build("hf:LlamaForCausalLM", "decode", batch=2, seq=0, context=40)
    assert workload.sizes == {"batch": 2, "context": 40}
    calls = record(workload.forward, repeats=3).calls
    attention = [c for c in calls if "scaled_dot_product" in c.op]
    assert len(attention) == 3 * 2  # two layers, three forwards
    assert {tuple(shapes(c, "query")) for c in attention} == {(2, 4, 1, 16)}
    assert {tuple(shapes(c, "key")) for c in attention} == {(2, 4, 41, 16)}


def test_a_vision_model_has_no_decode_phase():
    pytest.importorskip("transformers")
    from gpuarena.errors import GpuarenaError

    with pytest.raises(GpuarenaError, match="decode needs a generating model"):
        build("hf:ViTForImageClassification", "decode", batch=1, seq=0, context=8)
