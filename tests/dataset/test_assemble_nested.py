"""`dataset add` writes a module's graph anew from the harvest's records, finding the module by
where its calls start and its class; a Sequential inside a Sequential (RegNet's stages) starts
where its parent does, and the parent's graph, with more inputs than the first writing named,
was written for the child: its inputs `input_`, `input__`... were not in the problem's axes, so
the check left RegNet's level-4 blocks out ("KeyError: 'input__0'") (issue 48)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from gpuarena.dataset import assemble
from gpuarena.dataset.harvest import harvest
from gpuarena.dataset.record import CallRecord


class Model(nn.Module):
    def __init__(self, stage: nn.Module):
        super().__init__()
        self.stage = stage

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage(x)


def _signature(reference: str) -> str:
    return reference.split("def reference(", 1)[1].split(")", 1)[0]


def test_a_module_nested_in_one_of_its_class_is_written_anew_as_itself(tmp_path: Path):
    torch.manual_seed(0)
    inner = nn.Sequential(nn.Linear(32, 48), nn.GELU(), nn.Linear(48, 32), nn.LayerNorm(32))
    net = Model(nn.Sequential(inner, nn.Linear(32, 40), nn.ReLU(), nn.Linear(40, 24))).eval()
    x = torch.randn(4, 16, 32)
    out = tmp_path / "h"
    harvest(
        lambda: net(x), out, model="nested", phase="prefill", sizes={"batch": 4, "seq": 16}, command="test",
        min_share=0.0, repeats=1, against=[], net=net,
    )  # fmt: skip
    report = json.loads((out / "harvest.json").read_text())
    groups = [g for g in report["groups"] if g["op"] == "module:Sequential" and g["status"] == "written"]
    assert len(groups) == 2 and groups[0]["first_call"] == groups[1]["first_call"]  # both start at x
    calls = [CallRecord.model_validate_json(line) for line in assemble._lines(out, "profile.jsonl")]
    written = assemble._module_references(out, calls, groups)
    for group in groups:
        first = (out / group["problem"] / "reference.py").read_text()
        assert _signature(written[group["problem"]]) == _signature(first)
