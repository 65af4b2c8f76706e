"""A harvested norm returns its output only: native_layer_norm's mean and reciprocal deviation
(and a batch norm's saved statistics) are for the backward, and a centred input's mean is below
a bfloat16 tolerance everywhere, so the check refused every LayerNorm and BatchNorm harvested
(BERT's, ViT's, StarCoder2's, ResNet-50's: "output out1 is smaller than atol") (issue 48)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from gpuarena.dataset import candidate
from gpuarena.dataset.record import record
from gpuarena.harness.problem_check import check_problem
from gpuarena.problems import load_problem


def _written(tmp_path: Path, forward, op: str) -> Path:
    (call,) = [c for c in record(forward).calls if c.op == op]
    return candidate.write(tmp_path / "norm", call, "norm", op, 1.0, [], [])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_a_layer_norm_returns_its_output_alone_and_passes_its_check(tmp_path: Path, dtype: torch.dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 64, 256, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(256, generator=g)).to(dtype)
    b = (0.1 * torch.randn(256, generator=g)).to(dtype)
    folder = _written(tmp_path, lambda: F.layer_norm(x, (256,), w, b, 1e-5), "aten.native_layer_norm.default")
    problem = load_problem(folder)
    assert problem.spec.outputs == ["output"]
    inputs = {"input": x, "weight": w, "bias": b}
    torch.testing.assert_close(problem.reference(**inputs), F.layer_norm(x, (256,), w, b, 1e-5))
    report = check_problem(folder)
    assert report.ok, report


def test_an_inference_batch_norm_returns_its_output_alone(tmp_path: Path):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 32, 14, 14, generator=g).to(torch.bfloat16)
    mean, var = 0.1 * torch.randn(32, generator=g), 1 + 0.1 * torch.rand(32, generator=g)
    w, b = 1 + 0.1 * torch.randn(32, generator=g), 0.1 * torch.randn(32, generator=g)
    stats = [t.to(torch.bfloat16) for t in (mean, var, w, b)]
    calls = record(lambda: F.batch_norm(x, stats[0], stats[1], stats[2], stats[3], training=False)).calls
    (call,) = [c for c in calls if "batch_norm" in c.op]
    assert len(candidate.kept_outputs(call)) == 1
    # its saved statistics are empty tensors on the CPU: no reason to refuse what it returns
    assert 0 in call.outputs[1].shape and candidate.unsupported(call) is None
    folder = candidate.write(tmp_path / "bn", call, "bn", call.op, 1.0, [], [])
    assert load_problem(folder).spec.outputs == ["output"]
    report = check_problem(folder)
    assert report.ok, report


def test_the_dataset_writes_a_norm_s_outputs_anew_with_its_reference(tmp_path: Path):
    """A harvest written before returns the norm's three results in problem.toml; the dataset
    writes its reference anew from the raw call, and its outputs with it, so the two agree."""
    from gpuarena.dataset.assemble import add
    from gpuarena.dataset.harvest import harvest

    g = torch.Generator().manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 96), torch.nn.LayerNorm(96)).eval()
    with torch.no_grad():
        net[1].weight.copy_(1 + 0.1 * torch.randn(96, generator=g))
        net[1].bias.copy_(0.1 * torch.randn(96, generator=g))
    x = torch.randn(8, 40, 64, generator=g)
    out = tmp_path / "h"
    report = harvest(
        lambda: net(x), out, model="tiny", phase="prefill", sizes={"batch": 8, "seq": 40}, command="test",
        min_share=0.0, repeats=1, against=[],
    )  # fmt: skip
    (group,) = [g for g in report.groups if g.op == "aten.native_layer_norm.default"]
    assert group.status == "written"
    toml = out / group.problem / "problem.toml"
    toml.write_text(toml.read_text().replace('outputs = ["output"]', 'outputs = ["out0", "out1", "out2"]'))
    dataset = add([out], tmp_path / "ds")
    (entry,) = [e for e in dataset.entries if e.problem.startswith("level1/native_layer_norm")]
    assert entry.status == "kept", entry.reasons
    assert load_problem(tmp_path / "ds" / entry.problem).spec.outputs == ["output"]
