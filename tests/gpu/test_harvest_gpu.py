"""The harvester on an NVIDIA GPU: `pytest -m gpu tests/gpu/test_harvest_gpu.py`.

KernelTimer gives each aten call its own kernels' device time (the profiler's CUPTI records), so
a view costs nothing and a matmul costs what its kernel ran, whatever the host did around it."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from gpuarena.cli.app import app
from gpuarena.dataset.models import build
from gpuarena.dataset.record import KernelTimer, record

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]


def test_kernel_timer_bills_each_call_its_own_kernels():
    workload = build(
        "llama:dim=1024,layers=2,heads=8,vocab=4096,ffn=2816",
        "prefill",
        batch=4,
        seq=512,
        context=0,
        device="cuda",
        dtype=torch.bfloat16,
    )
    calls = record(workload.forward, repeats=2, timer=KernelTimer()).calls
    assert [c.index for c in calls] == list(range(len(calls)))
    views = [c for c in calls if c.metadata_only]
    assert views and all(c.seconds == 0 for c in views)
    mms = [c for c in calls if c.op == "aten.mm.default"]
    assert mms and all(c.seconds > 0 for c in mms)
    # the LM head (2048 x 1024 x 4096) is the largest mm: its kernel must take longer than a
    # 2048 x 1024 x 1024 one, which a launch-bound timer would not show
    flops = {
        c.index: 2
        * c.outputs[0].shape[0]
        * c.outputs[0].shape[1]
        * next(a.tensor.shape[1] for a in c.args if a.name == "self")
        for c in mms
    }
    biggest, smallest = max(mms, key=lambda c: flops[c.index]), min(mms, key=lambda c: flops[c.index])
    assert biggest.seconds > smallest.seconds
    # no kernel runs at the H200's 989 TFLOP/s dense bf16 peak or faster: a time that short was missed
    assert all(flops[c.index] / c.seconds < 1.0e15 for c in mms)


def test_harvest_of_a_transformers_model_on_the_gpu(tmp_path):
    pytest.importorskip("transformers")
    out = tmp_path / "harvest"
    result = CliRunner().invoke(
        app,
        [
            "harvest",
            "hf:LlamaForCausalLM:hidden_size=512,intermediate_size=1408,"
            "num_attention_heads=8,num_key_value_heads=8,num_hidden_layers=2,vocab_size=8192",
            "--device",
            "cuda",
            "--dtype",
            "bfloat16",
            "--batch",
            "2",
            "--seq",
            "256",
            "--min-share",
            "0.02",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "harvest.json").read_text())
    assert report["device"] == "cuda" and "--dtype bfloat16" in report["command"]
    assert abs(sum(g["share"] for g in report["groups"] if g["kind"] == "op") - 1) < 1e-6
    written = [g for g in report["groups"] if g["status"] == "written"]
    assert written and any(g["op"].startswith("aten.mm") for g in written)
    # the layers' submodules as fusions, each weighed by its kernels' time: a layer more than its MLP
    modules = {g["op"]: g for g in written if g["kind"] == "module"}
    assert {"module:LlamaDecoderLayer", "module:LlamaMLP", "module:LlamaAttention"} <= set(modules)
    assert modules["module:LlamaDecoderLayer"]["share"] > modules["module:LlamaMLP"]["share"] > 0
