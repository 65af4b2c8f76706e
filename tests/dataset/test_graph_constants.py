"""A module that returns a constant beside what it computed (T5's cross-attention returns its
position bias, zeros made inside it) is still a problem: the graph returns what the module
computed and leaves the constant out, where before the check refused the whole graph for a
constant output (issue 48)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from gpuarena.dataset import candidate
from gpuarena.dataset.graph import module_graph
from gpuarena.dataset.record import record
from gpuarena.harness.problem_check import check_problem


class WithBias(nn.Module):
    def __init__(self, dim: int = 32):
        super().__init__()
        self.proj = nn.Linear(dim, dim, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bias = torch.zeros(1, x.shape[1], x.shape[1], dtype=x.dtype)  # T5: no relative bias in this layer
        scores = self.proj(x) @ x.transpose(-1, -2) + bias
        return torch.softmax(scores, -1) @ x, bias


class OnlyConstant(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros(x.shape[0], 4) + 1


def _graph(net: nn.Module, x: torch.Tensor, cls: str):
    recorder = record(lambda: net.eval()(x), model=net)
    (module,) = [m for m in recorder.modules if m.cls == cls]
    return module_graph(recorder.calls, module, recorder.externals)


def test_a_constant_returned_beside_what_a_module_computed_is_left_out(tmp_path: Path):
    torch.manual_seed(0)
    net, x = nn.Sequential(WithBias()), torch.randn(2, 16, 32)
    graph = _graph(net, x, "WithBias")
    assert not isinstance(graph, str)
    assert len(graph.call.outputs) == 1  # the attention's output, not the zeros
    folder = candidate.write(
        tmp_path / "attn",
        graph.call,
        "attn",
        "WithBias",
        1.0,
        [],
        [],
        level=graph.level,
        reference=candidate.render(graph.call, "WithBias", "its calls", graph.body),
    )
    report = check_problem(folder)
    assert report.ok, report


def test_a_module_that_returns_only_constants_is_refused():
    reason = _graph(nn.Sequential(OnlyConstant()), torch.randn(3, 4), "OnlyConstant")
    assert isinstance(reason, str) and "returned no tensor it computed" in reason
