"""A transformers model's seeded weights are not the constants its initialisation leaves (zero
biases, unit norm weights, a batch norm's 0 and 1 statistics, ConvNeXt's 1e-6 layer scale): with
them a harvest's check found outputs that do not depend on a bias and layers that return their
input, and dropped the LayerNorms, biased linears and ConvNeXt layers (issue 48)."""

from __future__ import annotations

import pytest
import torch

from gpuarena.dataset.harvest import harvest
from gpuarena.dataset.models import BIAS_DEVIATION, SCALE_FLOOR, build

pytest.importorskip("transformers")


def constant(t: torch.Tensor) -> bool:
    return t.numel() > 1 and bool((t == t.reshape(-1)[0]).all())


def test_no_parameter_of_a_transformers_model_is_a_constant():
    bert = build("hf:BertForMaskedLM", "prefill", batch=1, seq=8, context=0).net
    assert bert is not None
    params = dict(bert.named_parameters())
    assert not [name for name, p in params.items() if p.is_floating_point() and constant(p)]
    norm_w = params["bert.embeddings.LayerNorm.weight"]
    norm_w = norm_w.detach()
    assert 0.5 < float(norm_w.mean()) < 1.5 and float(norm_w.std()) > 0.01  # near one, not one
    bias = params["bert.encoder.layer.0.attention.self.query.bias"]
    assert float(bias.abs().mean()) > BIAS_DEVIATION / 4  # a bias a fresh one changes the output of


def test_batch_norm_statistics_and_a_layer_scale_are_drawn_too():
    resnet = build("hf:ResNetForImageClassification", "prefill", batch=1, seq=1, context=0).net
    assert resnet is not None
    norms = [m for m in resnet.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and not any(constant(m.running_mean) or constant(m.running_var) for m in norms)
    assert all(bool((m.running_var > 0).all()) for m in norms)
    assert all(int(m.num_batches_tracked) == 0 for m in norms)  # integer buffers stay
    convnext = build("hf:ConvNextForImageClassification:size=full,image_size=32", "prefill", batch=1, seq=1, context=0)
    scales = [p for name, p in convnext.net.named_parameters() if "layer_scale" in name]
    assert scales and min(float(p.abs().mean()) for p in scales) > SCALE_FLOOR / 2  # was 1e-6


def test_convnext_layers_are_harvested_not_rejected_as_returning_their_input(tmp_path):
    # in bfloat16, as on a GPU: at a layer scale of 0.1 each layer's branch stayed within its tolerance
    spec = "hf:ConvNextForImageClassification:size=full,image_size=32"
    workload = build(spec, "prefill", batch=1, seq=1, context=0, dtype=torch.bfloat16)
    report = harvest(
        workload.forward,
        tmp_path / "convnext",
        model=spec,
        phase="prefill",
        sizes=workload.sizes,
        command="test",
        min_share=0.0,
        repeats=1,
        net=workload.net,
        against=[],
    )
    layers = [g for g in report.groups if g.op == "module:ConvNextLayer"]
    assert layers and all(g.status == "written" for g in layers), [(g.status, g.reasons) for g in layers]
    rejected = [(g.op, g.reasons) for g in report.groups if g.status == "rejected" and g.kind != "module"]
    assert not rejected, rejected  # the layer-scale multiplies and residual adds among them
