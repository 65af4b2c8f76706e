"""Fusion candidates: a submodule's recorded calls become a straight-line graph whose problem
computes what the module computed, names its inputs as the module does, writes sizes as the
inputs' sizes (so the dataset's small workload computes the same function), is levelled by what
it holds, and is refused (with the reason) where a replay could not be faithful."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset import candidate
from gpuarena.dataset.assemble import add
from gpuarena.dataset.graph import level_of, module_graph, residual_norms
from gpuarena.dataset.harvest import Harvest, harvest
from gpuarena.dataset.record import record
from gpuarena.dataset.small_workload import scale_down
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem


class Norm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Heads(nn.Module):
    """Splits into heads by a view, as attention does: [batch, seq, heads, head_dim]."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q = self.proj(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
        return torch.softmax(q @ q.transpose(-1, -2), dim=-1).sum(1)


class Net(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4):
        super().__init__()
        self.norm = Norm(dim)
        self.heads = Heads(dim, heads)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads(self.norm(x))


class Routed(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[x.sum(-1).nonzero().squeeze(-1)] * 2


def _recorded(net: nn.Module, x: torch.Tensor):
    net = net.eval()
    return record(lambda: net(x), model=net)


def _graph(recorder, cls: str):
    (module,) = [m for m in recorder.modules if m.cls == cls]
    return module_graph(recorder.calls, module, recorder.externals)


def test_a_module_becomes_a_problem_that_computes_what_it_computed(tmp_path: Path):
    torch.manual_seed(0)
    net, x = Net(), torch.randn(2, 48, 64)
    recorder = _recorded(net, x)
    graph = _graph(recorder, "Norm")
    assert not isinstance(graph, str)
    assert [a.name for a in graph.call.args] == ["x", "weight"]  # the module's argument and its parameter
    assert graph.level == 2 and graph.ops >= 4
    folder = candidate.write(
        tmp_path / "norm",
        graph.call,
        "norm",
        "Norm",
        1.0,
        [],
        [],
        level=graph.level,
        reference=candidate.render(graph.call, "Norm", "its calls", graph.body),
    )
    problem = load_problem(folder)
    assert problem.spec.level == 2
    torch.testing.assert_close(problem.reference(x=x, weight=net.norm.weight.detach()), net.norm(x).detach())
    assert check_problem(folder).ok


class Attend(nn.Module):
    """Attention whose output is merged back into one width by a view after the transpose: only
    the layout the recorded backend gave (heads inside the sequence) allows that view."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.proj = nn.Linear(dim, 3 * dim, bias=False)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.proj(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return o.transpose(1, 2).view(b, s, d) * 2


def test_attention_s_output_keeps_the_recorded_layout_whichever_backend_runs_it(tmp_path: Path):
    """A backend that lays its output out contiguously (the math one; an H100's for Mixtral's
    layer) must not break the recorded view that follows: the reference lays it out as recorded."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    net, x = nn.Sequential(Attend(64, 4)).eval(), torch.randn(1, 40, 64)  # recorded as a part of a model
    recorder = _recorded(net, x)
    graph = _graph(recorder, "Attend")
    assert not isinstance(graph, str)
    (attention,) = [c for c in recorder.calls if "attention" in c.op]
    assert not attention.outputs[0].contiguous  # the CPU's flash kernel: heads inside the sequence
    assert ".permute(0, 2, 1, 3).contiguous().permute(0, 2, 1, 3)" in "\n".join(graph.body)
    folder = candidate.write(
        tmp_path / "attend",
        graph.call,
        "attend",
        "Attend",
        1.0,
        [],
        [],
        level=graph.level,
        reference=candidate.render(graph.call, "Attend", "its calls", graph.body),
    )
    problem = load_problem(folder)
    expected = net(x).detach()
    with sdpa_kernel(SDPBackend.MATH):  # contiguous output: the bare view would raise
        got = problem.reference(x=x, proj_weight=net[0].proj.weight.detach())
    torch.testing.assert_close(got, expected)


def test_sizes_are_written_as_the_inputs_sizes_so_a_smaller_workload_computes_the_same(tmp_path: Path):
    torch.manual_seed(0)
    net, x = Net(dim=256, heads=4), torch.randn(1, 48, 256)
    graph = _graph(_recorded(net, x), "Heads")
    assert not isinstance(graph, str) and graph.level == 3 and not graph.fixed
    source = "\n".join(graph.body)
    assert "x.shape[1]" in source and "48" not in source  # the sequence, whatever its length
    assert ".shape[0] // 4, " in source or ".shape[2] // 4, " in source  # head_dim: the width over the heads
    folder = candidate.write(
        tmp_path / "heads",
        graph.call,
        "heads",
        "Heads",
        1.0,
        [],
        [],
        level=graph.level,
        reference=candidate.render(graph.call, "Heads", "its calls", graph.body),
    )
    problem = load_problem(folder)
    small = Heads(128, 4).eval()  # every size over 32 halved, as the dataset's small workload does
    y = torch.randn(1, 24, 128)
    got = problem.reference(x=y, proj_weight=small.proj.weight.detach())
    torch.testing.assert_close(got, small(y).detach())


def test_a_data_dependent_module_is_refused_with_its_reason():
    net = nn.Sequential(Routed())
    recorder = _recorded(net, torch.randn(8, 4))
    reason = _graph(recorder, "Routed")
    assert isinstance(reason, str) and "depend on the data" in reason


def test_levels_follow_what_the_graph_holds():
    assert level_of(["aten.mul.Tensor", "aten.add.Tensor"]) == 2
    assert level_of(["aten.mm.default", "aten.silu.default"]) == 3
    assert level_of(["aten.mm.default", "aten._scaled_dot_product_flash_attention_for_cpu.default"]) == 4
    assert level_of(["aten._grouped_mm.default", "aten.mul.Tensor"]) == 4


def test_small_workloads_of_fusions_keep_sizes_in_proportion():
    axes = {"x_0": 1, "x_1": 2048, "x_2": 4096, "q_0": 4096, "cos_2": 128, "heads": 32, "tokens": 197}
    small = scale_down(axes)
    assert small == {"x_0": 1, "x_1": 128, "x_2": 256, "q_0": 256, "cos_2": 8, "heads": 32, "tokens": 197}
    # a convolution's sizes stay in proportion (56 pixels divide by 8 at most), a stage's checks take well under 1 s
    assert scale_down({"b": 64, "c": 256, "h": 56, "k": 2048}) == {"b": 8, "c": 32, "h": 7, "k": 256}
    assert small["x_2"] == small["heads"] * small["cos_2"]  # hidden = heads x head_dim still


def test_a_mask_of_the_dtypes_extreme_is_redrawn_as_a_mask(tmp_path: Path):
    mask = torch.zeros(4, 4).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1), torch.finfo(torch.float32).min)
    scores = torch.randn(4, 4)
    (call,) = [c for c in record(lambda: torch.softmax(scores + mask, -1)).calls if c.op == "aten.add.Tensor"]
    problem = load_problem(candidate.write(tmp_path / "m", call, "add", "add", 1.0, [], []))
    inputs = problem.make_inputs(
        dict(problem.spec.workloads[0].axes), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    values = set(inputs["other"].unique().tolist())
    assert values == {0.0, torch.finfo(torch.float32).min}  # no overflow to inf, so no NaN downstream


def test_harvest_writes_module_problems_and_the_dataset_gives_them_a_small_workload(tmp_path: Path):
    pytest.importorskip("transformers")
    out = tmp_path / "llama"
    result = CliRunner().invoke(
        app,
        [
            "harvest",
            "hf:LlamaForCausalLM:hidden_size=1024,intermediate_size=2048,num_attention_heads=8,num_key_value_heads=8",
            "--seq",
            "48",
            "--min-share",
            "0",  # every module written: which pass a floor of shares is the busy CPU's timing
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = Harvest.model_validate_json((out / "harvest.json").read_text())
    modules = {g.op: g for g in report.groups if g.kind == "module" and g.status == "written"}
    assert {"module:LlamaRMSNorm", "module:LlamaMLP", "module:LlamaAttention", "module:LlamaDecoderLayer"} <= set(
        modules
    )
    assert modules["module:LlamaAttention"].level == 4 and modules["module:LlamaMLP"].level == 3
    assert modules["module:LlamaDecoderLayer"].calls == 2  # one group for the two layers
    assert (out / "modules.jsonl").is_file()
    # as if harvested on a GPU: the dataset adds a CPU workload, the sizes divided in proportion
    meta = json.loads((out / "harvest.json").read_text())
    (out / "harvest.json").write_text(json.dumps({**meta, "device": "cuda"}))
    dataset = add([out], tmp_path / "ds")
    kept = {e.problem for e in dataset.entries if e.status == "kept"}
    attention = modules["module:LlamaAttention"].problem
    assert attention in kept and modules["module:LlamaDecoderLayer"].problem in kept
    ours, theirs = ((root / attention / "reference.py").read_text() for root in (tmp_path / "ds", out))
    signature = "def reference("
    assert (
        ours.split(signature)[1].split(")")[0] == theirs.split(signature)[1].split(")")[0]
    )  # written anew, same names
    small = [w for w in load_problem(tmp_path / "ds" / attention).spec.workloads if w.name == "small"]
    assert small and dict(small[0].axes)["hidden_states_1"] == 12  # 48 tokens over 4, as the widths are


class PreNorm(nn.Module):
    """A pre-norm block's seams: the residual add in the block, the norm a child of it; and a
    norm after a bias add (broadcast: not a residual) and one after no add at all."""

    def __init__(self, dim: int = 16):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm = Norm(dim)
        self.biased_norm = Norm(dim)
        self.first_norm = Norm(dim)
        self.bias = nn.Parameter(torch.rand(dim))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.first_norm(x)
        hidden = x + self.proj(x)
        residual = hidden
        return residual, self.norm(hidden) + self.biased_norm(residual + self.bias)


def test_a_norm_after_a_residual_add_is_fused_with_it_across_the_module_boundary(tmp_path):
    net = PreNorm()
    recorder = record(lambda: net(torch.randn(2, 5, 16)), model=net)
    fused = residual_norms(recorder.calls, recorder.modules)
    assert [m.path for m in fused] == ["norm+residual"]  # not the first norm (no add), not the biased one
    (m,) = fused
    assert recorder.calls[m.start].op == "aten.add.Tensor" and m.end == next(
        n.end for n in recorder.modules if n.path == "norm"
    )
    made = module_graph(recorder.calls, m, recorder.externals)
    assert not isinstance(made, str) and made.level == 2
    assert [a.name for a in made.call.args] == ["residual", "hidden_states", "weight"]  # the norm's weight by its name
    # the harvest writes it as a level-2 problem returning the sum and the norm, and it passes check
    result = harvest(
        lambda: net(torch.randn(2, 5, 16)),
        tmp_path,
        model="prenorm",
        phase="prefill",
        sizes={"batch": 2},
        command="test",
        min_share=0,
        net=net,
    )
    (group,) = [g for g in result.groups if g.op == "module:Norm+residual"]
    assert group.status == "written" and group.level == 2 and group.calls == 1
    problem = load_problem(tmp_path / group.problem)
    assert problem.spec.outputs == ["out0", "out1"]
    inputs = problem.make_inputs(
        dict(problem.spec.workloads[0].axes), torch.float32, torch.device("cpu"), torch.Generator().manual_seed(0)
    )
    total, normed = problem.reference(**inputs)
    assert torch.equal(total, inputs["residual"] + inputs["hidden_states"])
    assert torch.allclose(normed, total * torch.rsqrt(total.pow(2).mean(-1, keepdim=True) + 1e-6) * inputs["weight"])
    assert "norm+residual" in (tmp_path / "modules.jsonl").read_text()  # kept for the dataset's assembler


class ConvNorm(nn.Module):
    """A convolution and a batch norm whose bias and running mean are zeros (the harvest leaves
    them out of the inputs and writes them as zeros of their shape)."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.conv(x)))


class ConvBlock(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.block = ConvNorm(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


def test_a_left_out_zero_tensor_takes_its_shape_from_the_input_it_matches_not_a_size_that_equals_it():
    """The batch (40) equals the channels (40) here: the zero bias must still be [channels], so the
    reference computes the same on a workload of another batch (ResNet-50's conv layer wrote
    `hidden_states.shape[0]`, right only where the batch was 64 like its channels)."""
    torch.manual_seed(0)
    net = ConvBlock(40)
    recorder = _recorded(net, torch.randn(40, 40, 4, 4))
    (module,) = [m for m in recorder.modules if m.cls == "ConvNorm"]
    graph = module_graph(
        recorder.calls, module, recorder.externals, ignored=frozenset({"norm_bias", "norm_running_mean"})
    )
    assert not isinstance(graph, str), graph
    zeros = [line for line in graph.body if "torch.zeros(" in line]
    assert zeros and not any("shape[0]" in line for line in zeros), zeros
    assert all(".shape," in line for line in zeros), zeros  # an input's whole shape
