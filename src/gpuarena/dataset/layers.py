"""Whole layers from published model configs, as level-3 and level-4 problems (issue 48).

The harvests (dataset/harvest.py) find what a model's modules run, but at the config class's
defaults and with the decoder layers and MoE blocks mostly left out. These problems are written
instead: each reference is plain PyTorch, assembled from the pieces in dataset/layer_ops.py
(copied by source, so it stands alone), with the constants of one model's published config
(dataset/layer_configs.py) and every parameter an input drawn at the model's scale, biases and
norm weights included, so that every input matters. Level 3: an attention module with its
projections, a mixture of experts with its router, BERT's attention and MLP modules; level 4: a
whole decoder or encoder layer, ResNet-50's bottleneck blocks, EfficientNet-B0's MBConv and
MobileNetV2's inverted residual blocks.

`write(root)` writes them as ROOT/level3/layer-*/ and ROOT/level4/layer-*/ (the same files every
time) and, where ROOT is a dataset (dataset.json), lists them there as kept, their harvest
"published config <model>". `python scripts/make_layers.py -o dataset/layers` runs it: a root of
their own, since the suite's shipped baseline times every problem of dataset/problems.
"""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset import layer_ops, written
from gpuarena.dataset.layer_configs import ARCHS

WEIGHT = written.WEIGHT
"""Every layer problem's weight: flat, since no harvest measured its share of a model's time."""
PREFIX = "layer-"
BOOST = {3: 6.0, 4: 8.0}
"""How far a MoE layer's hidden states lean toward their tokens' experts' router rows (layer_ops.lean),
by level. In a whole layer (level 4) the router sees the attention's output, which an honest kernel
rounds otherwise than the reference: there the router's rows are also drawn at half the scale, so
that no rounding flips a choice; a block alone (level 3) routes its input as given, and its margins
leave DeepSeek-V3's selection bias room to change choices."""

_T = "batch*seq"
# input groups: (name, shape as axis products, how it is drawn, scale, its multiply: linear, expert, conv)
Group = list[tuple[str, list[str], str, float, str]]
GROUPS: dict[str, Group] = {
    "x": [("x", ["batch", "seq", "hidden"], "act", 1.0, "")],
    "rms_attn": [("attn_norm", ["hidden"], "norm", 1.0, "")],
    "rms_mlp": [("mlp_norm", ["hidden"], "norm", 1.0, "")],
    "ln_attn": [("attn_norm", ["hidden"], "norm", 1.0, ""), ("attn_norm_b", ["hidden"], "bias", 0.1, "")],
    "ln_mlp": [("mlp_norm", ["hidden"], "norm", 1.0, ""), ("mlp_norm_b", ["hidden"], "bias", 0.1, "")],
    "gemma_attn_norm": [("attn_norm", ["hidden"], "norm", 0.0, "")],
    "gemma_post_attn_norm": [("post_attn_norm", ["hidden"], "norm", 0.0, "")],
    "gemma_mlp_norm": [("mlp_norm", ["hidden"], "norm", 0.0, "")],
    "gemma_post_mlp_norm": [("post_mlp_norm", ["hidden"], "norm", 0.0, "")],
    "gqa": [
        ("wq", ["heads*head_dim", "hidden"], "weight", 1.0, "linear"),
        ("wk", ["kv_heads*head_dim", "hidden"], "weight", 1.0, "linear"),
        ("wv", ["kv_heads*head_dim", "hidden"], "weight", 1.0, "linear"),
        ("wo", ["hidden", "heads*head_dim"], "weight", 1.0, "linear"),
    ],
    "qkv_bias": [
        ("bq", ["heads*head_dim"], "bias", 0.5, ""),
        ("bk", ["kv_heads*head_dim"], "bias", 0.5, ""),
        ("bv", ["kv_heads*head_dim"], "bias", 0.1, ""),
    ],
    "qv_bias": [  # no key bias: without rotary embeddings, softmax cancels it (BERT, ViT)
        ("bq", ["heads*head_dim"], "bias", 0.5, ""),
        ("bv", ["kv_heads*head_dim"], "bias", 0.1, ""),
    ],
    "o_bias": [("bo", ["hidden"], "bias", 0.1, "")],
    "qk_norm": [("q_norm", ["head_dim"], "norm", 1.0, ""), ("k_norm", ["head_dim"], "norm", 1.0, "")],
    "fused_qkv": [
        ("wqkv", ["3*heads*head_dim", "hidden"], "weight", 1.0, "linear"),
        ("wo", ["hidden", "heads*head_dim"], "weight", 1.0, "linear"),
    ],
    "cache": [
        ("k_cache", ["batch", "kv_heads", "context", "head_dim"], "cache", 1.0, ""),
        ("v_cache", ["batch", "kv_heads", "context", "head_dim"], "cache", 1.0, ""),
    ],
    "window": [("window", ["window"], "scalar", 1.0, "")],
    "mla_q_lora": [
        ("wq_a", ["q_rank", "hidden"], "weight", 1.0, "linear"),
        ("q_a_norm", ["q_rank"], "norm", 1.0, ""),
        ("wq_b", ["heads*qk_dim", "q_rank"], "weight", 1.0, "linear"),
    ],
    "mla_q": [("wq", ["heads*qk_dim", "hidden"], "weight", 1.0, "linear")],
    "mla_kv": [
        ("wkv_a", ["kv_a_dim", "hidden"], "weight", 1.0, "linear"),
        ("kv_a_norm", ["kv_rank"], "norm", 1.0, ""),
        ("wkv_b", ["heads*kvb_dim", "kv_rank"], "weight", 1.0, "linear"),
        ("wo", ["hidden", "heads*v_dim"], "weight", 1.0, "linear"),
    ],
    "glu": [
        ("w_gate", ["inter", "hidden"], "weight", 1.0, "linear"),
        ("w_up", ["inter", "hidden"], "weight", 1.0, "linear"),
        ("w_down", ["hidden", "inter"], "weight", 1.0, "linear"),
    ],
    "fused_glu": [
        ("w_gate_up", ["2*inter", "hidden"], "weight", 1.0, "linear"),
        ("w_down", ["hidden", "inter"], "weight", 1.0, "linear"),
    ],
    "gelu": [
        ("w_up", ["inter", "hidden"], "weight", 1.0, "linear"),
        ("b_up", ["inter"], "bias", 0.1, ""),
        ("w_down", ["hidden", "inter"], "weight", 1.0, "linear"),
        ("b_down", ["hidden"], "bias", 0.1, ""),
    ],
    "router": [("w_router", ["experts", "hidden"], "weight", 1.0, "linear")],
    "router_bias": [("router_bias", ["experts"], "bias", 0.05, "")],
    "experts": [
        ("experts_gate", ["experts", "moe_inter", "hidden"], "weight", 1.0, "expert"),
        ("experts_up", ["experts", "moe_inter", "hidden"], "weight", 1.0, "expert"),
        ("experts_down", ["experts", "hidden", "moe_inter"], "weight", 1.0, "expert"),
    ],
    "shared": [
        ("shared_gate", ["shared_inter", "hidden"], "weight", 1.0, "linear"),
        ("shared_up", ["shared_inter", "hidden"], "weight", 1.0, "linear"),
        ("shared_down", ["hidden", "shared_inter"], "weight", 1.0, "linear"),
    ],
    "shared_router": [("shared_router", ["1", "hidden"], "weight", 1.0, "linear")],
}


def _conv_bn(name: str, out: str, into: str, k: int, at: str) -> Group:
    return [
        (name, [out, into, str(k), str(k)], "weight", 1.0, f"conv:{at}"),
        (f"{name}_w", [out], "norm", 1.0, ""),
        (f"{name}_b", [out], "bias", 0.1, ""),
        (f"{name}_mean", [out], "bias", 0.1, ""),
        (f"{name}_var", [out], "positive", 1.0, ""),
    ]


GROUPS["bottleneck"] = [
    ("x", ["batch", "cin", "size", "size"], "act", 1.0, ""),
    *_conv_bn("conv1", "mid", "cin", 1, "size"),
    *_conv_bn("conv2", "mid", "mid", 3, "out_size"),
    *_conv_bn("conv3", "cout", "mid", 1, "out_size"),
]
GROUPS["down"] = _conv_bn("down", "cout", "cin", 1, "out_size")
GROUPS["inverted"] = [
    ("x", ["batch", "cin", "size", "size"], "act", 1.0, ""),
    *_conv_bn("expand", "mid", "cin", 1, "size"),
    *_conv_bn("depthwise", "mid", "1", 3, "size"),
    *_conv_bn("project", "cin", "mid", 1, "size"),
]
GROUPS["se"] = [
    ("se_reduce", ["se", "mid", "1", "1"], "weight", 1.0, "conv:1"),
    ("se_reduce_b", ["se"], "bias", 0.1, ""),
    ("se_expand", ["mid", "se", "1", "1"], "weight", 1.0, "conv:1"),
    ("se_expand_b", ["mid"], "bias", 0.1, ""),
]
OUTPUT = {"bottleneck": "batch*cout*out_size*out_size", "inverted_residual": "batch*cin*size*size"}
"""The output's size of the entries whose output is not the hidden states' [batch, seq, hidden]."""


class Layer(BaseModel):
    """One problem to write: which model, which piece of it, which inputs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    part: str
    """The name's last part: layer-<arch>-<part>."""
    level: int
    arch: str
    entry: str
    """The layer_ops function the reference calls."""
    groups: list[str]
    """Input groups (GROUPS), in the order of reference()'s parameters."""
    summary: str
    tags: list[str]
    full: dict[str, int] = {}
    """Axes that differ from the arch's real-size workload (a decode, a stage of ResNet)."""
    small: dict[str, int] = {}
    extra: list[tuple[str, dict[str, int]]] = []
    """Further real-size workloads (name, axes over the arch's)."""
    phase: str = "prefill"
    unchecked: list[str] = []
    """Device kinds it has not yet passed `gpuarena check` on (docs/formats.md): the first run
    there checks it, and the suite's GPU baseline has no time for it until a GPU session has."""

    @property
    def name(self) -> str:
        return f"{PREFIX}{self.arch}-{self.part}"


DECODE = {"batch": 16, "seq": 1, "context": 4096}
DECODE_SMALL = {"batch": 2, "seq": 1, "context": 64}
_ATT, _MOE, _DEC, _ENC = ["attention"], ["moe", "router"], ["decoder-layer"], ["encoder-layer"]


def _l(part: str, level: int, arch: str, entry: str, groups: str, summary: str, tags: list[str], **kw: Any) -> Layer:
    return Layer(
        part=part, level=level, arch=arch, entry=entry, groups=groups.split(), summary=summary, tags=tags, **kw
    )


LAYERS: list[Layer] = [
    # level 3: attention with its projections
    _l("attention", 3, "llama3-8b", "attention_block", "x gqa", "GQA attention with q/k/v/o projections, RoPE (theta 500000), causal", _ATT),
    _l("attention-decode", 3, "llama3-8b", "attention_block", "x gqa cache", "One decode step of GQA attention: projections, RoPE at the cache's end, a KV cache of 4096", _ATT, full=DECODE, small=DECODE_SMALL, phase="decode"),
    _l("attention", 3, "qwen2_5-7b", "attention_block", "x gqa qkv_bias", "GQA attention (7 query heads per KV head) with q/k/v biases before RoPE, causal", _ATT),
    _l("attention-swa", 3, "mistral-7b", "attention_block", "x gqa window", "GQA attention with a 4096-token sliding window over an 8192-token prefill", _ATT + ["sliding-window"]),
    _l("attention", 3, "gemma2-9b", "attention_block", "x gqa", "GQA attention with head_dim 256, scale query_pre_attn_scalar^-0.5 and tanh soft-capping of the scores at 50", _ATT + ["softcap"]),
    _l("attention", 3, "phi3-mini", "attention_block", "x fused_qkv window", "Multi-head attention from one fused qkv projection, head_dim 96, sliding window 2047", _ATT),
    _l("mla-attention", 3, "deepseek-v3", "attention_block", "x mla_q_lora mla_kv", "Multi-head latent attention: low-rank q (1536) and kv (512) with RMSNorms, decoupled RoPE (YaRN) on 64 dims", _ATT + ["mla"]),
    _l("mla-attention", 3, "deepseek-v2-lite", "attention_block", "x mla_q mla_kv", "Multi-head latent attention without a query rank: kv latent 512 with RMSNorm, decoupled RoPE (YaRN)", _ATT + ["mla"]),
    _l("attention", 3, "bert-base", "attention_block", "x gqa qv_bias o_bias ln_attn", "BERT's attention module: bidirectional attention with biases, output dense, residual and LayerNorm", _ATT + ["post-norm"]),
    _l("ffn", 3, "bert-base", "mlp_block", "x gelu ln_mlp", "BERT's MLP: dense + GELU, dense, residual and LayerNorm", ["mlp", "post-norm"]),
    # level 3: mixtures of experts with their routers
    _l("moe", 3, "mixtral-8x7b", "mlp_block", "x router experts", "Sparse MoE: softmax router, top-2 of 8 SwiGLU experts, renormalised weights", _MOE),
    _l("moe", 3, "qwen3-30b-a3b", "mlp_block", "x router experts", "Sparse MoE: softmax router, top-8 of 128 SwiGLU experts, renormalised weights", _MOE),
    _l("moe", 3, "qwen1_5-moe-a2_7b", "mlp_block", "x router experts shared shared_router", "Sparse MoE: top-4 of 60 experts (weights not renormalised) plus a shared expert gated by a sigmoid", _MOE + ["shared-expert"]),
    _l("moe", 3, "deepseek-v3", "mlp_block", "x router router_bias experts shared", "DeepSeekMoE: sigmoid scores with a selection bias, top-4 of 8 groups, top-8 of 256 experts, weights x2.5, one shared expert", _MOE + ["shared-expert"]),
    _l("moe", 3, "deepseek-v2-lite", "mlp_block", "x router experts shared", "DeepSeekMoE: softmax router, top-6 of 64 experts, two shared experts", _MOE + ["shared-expert"]),
    # level 4: whole layers
    _l("decoder", 4, "llama3-8b", "decoder_layer", "x rms_attn gqa rms_mlp glu", "Llama decoder layer: RMSNorm, GQA attention, residual, RMSNorm, SwiGLU MLP, residual", _DEC),
    _l("decoder-decode", 4, "llama3-8b", "decoder_layer", "x rms_attn gqa cache rms_mlp glu", "Llama decoder layer, one decode step against a KV cache of 4096", _DEC, full=DECODE, small=DECODE_SMALL, phase="decode"),
    _l("decoder", 4, "qwen2_5-7b", "decoder_layer", "x rms_attn gqa qkv_bias rms_mlp glu", "Qwen2 decoder layer: q/k/v biases, GQA 7:1, SwiGLU MLP", _DEC),
    _l("decoder-swa", 4, "mistral-7b", "decoder_layer", "x rms_attn gqa window rms_mlp glu", "Mistral decoder layer with a 4096-token sliding window over an 8192-token prefill", _DEC + ["sliding-window"]),
    _l("decoder", 4, "gemma2-9b", "decoder_layer", "x gemma_attn_norm gqa gemma_post_attn_norm gemma_mlp_norm glu gemma_post_mlp_norm", "Gemma-2 decoder layer: (1+w) RMSNorms before and after attention and MLP, soft-capped attention, GeGLU", _DEC + ["softcap"]),
    _l("decoder", 4, "phi3-mini", "decoder_layer", "x rms_attn fused_qkv window rms_mlp fused_glu", "Phi-3 decoder layer: fused qkv and gate_up projections, MHA with head_dim 96", _DEC),
    _l("decoder", 4, "mixtral-8x7b", "decoder_layer", "x rms_attn gqa rms_mlp router experts", "Mixtral decoder layer: GQA attention and a top-2 of 8 sparse MoE", _DEC + ["moe"]),
    _l("decoder", 4, "qwen3-30b-a3b", "decoder_layer", "x rms_attn gqa qk_norm rms_mlp router experts", "Qwen3-MoE decoder layer: attention with per-head q/k RMSNorm, top-8 of 128 MoE", _DEC + ["moe"]),
    _l("decoder", 4, "deepseek-v3", "decoder_layer", "x rms_attn mla_q_lora mla_kv rms_mlp router experts shared", "DeepSeek-V3 MoE decoder layer: latent attention and DeepSeekMoE (256 experts, group-limited top-8; no selection bias)", _DEC + ["moe", "mla"]),
    _l("decoder", 4, "deepseek-v2-lite", "decoder_layer", "x rms_attn mla_q mla_kv rms_mlp router experts shared", "DeepSeek-V2-Lite MoE decoder layer: latent attention and top-6 of 64 experts with two shared", _DEC + ["moe", "mla"]),
    _l("encoder", 4, "bert-base", "decoder_layer", "x gqa qv_bias o_bias ln_attn gelu ln_mlp", "BERT encoder layer (post-norm): attention, residual, LayerNorm, GELU MLP, residual, LayerNorm", _ENC),
    _l("encoder", 4, "vit-b16", "decoder_layer", "x ln_attn gqa qv_bias o_bias ln_mlp gelu", "ViT encoder layer (pre-norm): LayerNorm, attention, residual, LayerNorm, GELU MLP, residual", _ENC),
    _l("bottleneck", 4, "resnet50", "bottleneck", "bottleneck", "ResNet-50 bottleneck block with its identity shortcut: three conv + BatchNorm, ReLU", ["conv", "batchnorm"],
       full={"out_size": 56}, small={"out_size": 16}, extra=[("stage3", {"batch": 64, "size": 14, "out_size": 14, "cin": 1024, "mid": 256, "cout": 1024})]),
    _l("bottleneck-downsample", 4, "resnet50", "bottleneck", "bottleneck down", "ResNet-50's first bottleneck of a stage: stride 2 on the 3x3 conv and a strided 1x1 projection shortcut", ["conv", "batchnorm"],
       full={"size": 56, "out_size": 28, "cin": 256, "mid": 128, "cout": 512}, small={"size": 16, "out_size": 8, "cin": 32, "mid": 16, "cout": 64},
       extra=[("stage4", {"batch": 64, "size": 14, "out_size": 7, "cin": 1024, "mid": 512, "cout": 2048})]),
    _l("mbconv", 4, "efficientnet-b0", "inverted_residual", "inverted se", "EfficientNet-B0's MBConv block, a repeat of stage 4: 1x1 expansion x6, 3x3 depthwise, squeeze-and-excitation, 1x1 projection, each convolution with its batch norm, SiLU, identity shortcut", ["conv", "batchnorm", "depthwise", "squeeze-excite"],
       extra=[("stage2", {"batch": 64, "size": 56, "cin": 24, "mid": 144, "se": 6})]),
    _l("inverted-residual", 4, "mobilenet-v2", "inverted_residual", "inverted", "MobileNetV2's inverted residual block, a repeat of its 14x14 stage: 1x1 expansion x6, 3x3 depthwise, 1x1 projection, each convolution with its batch norm, ReLU6 after the first two, identity shortcut", ["conv", "batchnorm", "depthwise"],
       extra=[("stage3", {"batch": 64, "size": 28, "cin": 32, "mid": 192})]),
]  # fmt: skip

DEFAULT_BF16 = {"atol": 2e-2, "rtol": 2e-2, "l2": 1e-2}
RESIDUAL_STREAM = {"atol": 5e-2}
"""A whole layer's bfloat16 tolerance, as level4/llama_decoder_mlp_block's: its residual stream is
rounded at every add, and a mixture sums experts' rounded outputs, so an honest kernel errs
relative to the summands' size, not each element's."""
TOLERANCE: dict[str, dict[str, float]] = {
    "layer-llama3-8b-attention": {"outside": 0.004},
    "layer-qwen2_5-7b-attention": {"outside": 0.003},
    "layer-mistral-7b-attention-swa": {"outside": 0.005},
    "layer-gemma2-9b-attention": {"outside": 0.004},
    "layer-phi3-mini-attention": {"outside": 0.003},
    "layer-deepseek-v3-mla-attention": {"outside": 0.006},
    "layer-deepseek-v2-lite-mla-attention": {"outside": 0.0003},
    "layer-bert-base-attention": {"outside": 9e-05},
    "layer-mixtral-8x7b-moe": {"outside": 8e-06},
    "layer-qwen3-30b-a3b-moe": {"outside": 2e-05},
    "layer-qwen1_5-moe-a2_7b-moe": {"outside": 0.0002},
    "layer-deepseek-v3-moe": {"outside": 0.003},
    "layer-deepseek-v2-lite-moe": {"outside": 0.002},
    "layer-gemma2-9b-decoder": {"outside": 0.003},
    "layer-qwen3-30b-a3b-decoder": {"outside": 0.0009},
    "layer-deepseek-v2-lite-decoder": {"outside": 0.005},
    "layer-deepseek-v3-decoder": {"outside": 0.0009},
    "layer-resnet50-bottleneck": {"outside": 0.0008},
    "layer-resnet50-bottleneck-downsample": {"outside": 0.003},
}
"""Per problem: the share of elements that may fall outside the elementwise bound (`outside`), as
`gpuarena check` derives it from the reference's own float32 computation (check.derived_outside):
the larger of what the CPU's small workload and the H200's real-size one asked for
(`scripts/make_layers.py --check [--device cuda]`)."""


def _inputs(layer: Layer) -> Group:
    return [spec for group in layer.groups for spec in GROUPS[group]]


def _product(shape: list[str]) -> str:
    return "*".join(shape)


def _flops(layer: Layer) -> str:
    """Multiply-adds of the matrix multiplies and convolutions, twice; attention's scores and
    sums over the (query, key) pairs it keeps; the experts' for the top-k each token uses."""
    cfg = ARCHS[layer.arch].cfg
    terms = []
    for _name, shape, _init, _scale, role in _inputs(layer):
        if role == "linear":
            terms.append(f"2*{_T}*{_product(shape)}")
        elif role == "expert":
            terms.append(f"2*{_T}*{cfg['top_k']}*{_product(shape[1:])}")
        elif role.startswith("conv:"):
            at = role.split(":")[1]
            terms.append(f"2*batch*{at}*{at}*{_product(shape)}")
    mla = "mla_kv" in layer.groups
    if mla or "gqa" in layer.groups or "fused_qkv" in layer.groups:
        width = "(qk_dim+v_dim)" if mla else "2*head_dim"
        if "cache" in layer.groups:
            pairs = "(seq*context+seq*(seq+1)/2)"
        elif "window" in layer.groups:
            pairs = "(seq*window-window*(window-1)/2)"
        elif cfg.get("causal", True):
            pairs = "seq*(seq+1)/2"
        else:
            pairs = "seq*seq"
        terms.append(f"2*batch*heads*{pairs}*{width}")
    return " + ".join(terms)


def _bytes(layer: Layer) -> str:
    """Every input read once and the output written once (every expert's weights included)."""
    sizes = [_product(shape) for _n, shape, init, _s, _r in _inputs(layer) if init != "scalar"]
    sizes.append(OUTPUT.get(layer.entry, "batch*seq*hidden"))
    if "cache" in layer.groups:  # the new keys and values
        sizes.append("2*batch*kv_heads*seq*head_dim")
    return f"({' + '.join(sizes)}) * dtype_bytes"


def _helpers(entry: str) -> list[str]:
    """The sources of `entry` and of every layer_ops function it calls, in the module's order."""
    functions = {
        name: inspect.getsource(obj)
        for name, obj in vars(layer_ops).items()
        if inspect.isfunction(obj) and obj.__module__ == layer_ops.__name__
    }
    needed, todo = {"draw_inputs", entry}, [entry, "draw_inputs"]
    while todo:
        source = functions[todo.pop()]
        for name in functions:
            if name not in needed and re.search(rf"\b{name}\b", source):
                needed.add(name)
                todo.append(name)
    return [source for name, source in functions.items() if name in needed]


def reference_source(layer: Layer) -> str:
    """reference.py: the config, the inputs' specs, the pieces it uses, reference and make_inputs."""
    arch = ARCHS[layer.arch]
    specs: dict[str, dict[str, Any]] = {
        name: {"shape": shape, "init": init, "scale": scale} for name, shape, init, scale, _r in _inputs(layer)
    }
    for name in ("q_norm", "k_norm"):  # per-head norms weigh dimensions apart, as trained ones do
        if name in specs:
            specs[name]["spread"] = 0.5
    if "router" in layer.groups:  # routing with margins (layer_ops.lean)
        keys = ("top_k", "n_group", "topk_group")
        specs["x"]["route"] = {**{k: arch.cfg[k] for k in keys if k in arch.cfg}, "boost": BOOST[layer.level]}
        if layer.level == 4:  # the attention's rounding reaches the router: wider margins
            specs["w_router"]["scale"] = 0.5
    names = ", ".join(specs)
    parts = [
        f'"""{layer.summary}.\n\n{arch.title}, with the numbers of its published config ({arch.source}).\n'
        "Written by gpuarena.dataset.layers (scripts/make_layers.py) in plain PyTorch from the published\n"
        'architecture, not harvested; every parameter is an input."""\n',
        "from __future__ import annotations\n\nimport math\nfrom typing import Any\n\nimport torch\n"
        "import torch.nn.functional as F\n\nParams = dict[str, Any]\nConfig = dict[str, Any]\n",
        f"CONFIG: Config = {json.dumps(arch.cfg, indent=4)}\n".replace("true", "True").replace("false", "False"),
        "INPUTS: dict[str, dict[str, Any]] = {\n"
        + "".join(f"    {json.dumps(name)}: {json.dumps(spec)},\n" for name, spec in specs.items())
        + "}\n",
        *_helpers(layer.entry),
        f"def reference({names}):\n    return {layer.entry}(dict(locals()), CONFIG)\n",
        "def make_inputs(axes, dtype, device, generator):\n"
        "    return draw_inputs(INPUTS, axes, dtype, device, generator)\n",
    ]
    return "\n\n".join(part.rstrip("\n") + "\n" for part in parts)


def _axes(layer: Layer, axes: dict[str, int], formulas: str) -> dict[str, int]:
    """The axes a workload names: those its inputs' shapes and the formulas use."""
    used = {token for _n, shape, *_ in _inputs(layer) for e in shape for token in e.split("*")}
    used |= {token for token in formulas.replace("(", " ").replace(")", " ").replace("*", " ").split()}
    return {k: v for k, v in axes.items() if k in used}


def problem_spec(layer: Layer) -> dict[str, Any]:
    """problem.toml as a dict: workloads at the real size (GPU) and small (CPU), formulas,
    provenance naming the published config, a flat weight."""
    arch = ARCHS[layer.arch]
    flops, moved = _flops(layer), _bytes(layer)
    full = {**arch.full, **layer.full}
    size = f"{full['batch']}x{full['seq']}" if "seq" in full else f"{full['batch']}x{full['size']}"
    if "context" in full:
        size = f"{full['batch']}x{full['context']}"
    workloads = [
        {"name": "small", "axes": _axes(layer, {**arch.small, **layer.small}, flops + moved), "dtype": "bfloat16",
         "weight": 1.0, "devices": ["cpu"]},  # for machines without a GPU: the real sizes score a GPU
        {"name": f"{layer.arch}-{layer.phase}-{size}", "axes": _axes(layer, full, flops + moved), "dtype": "bfloat16",
         "weight": 1.0, "devices": ["cuda"]},
    ]  # fmt: skip
    for name, axes in layer.extra:
        workloads.append(
            {"name": f"{layer.arch}-{name}", "axes": _axes(layer, {**full, **axes}, flops + moved), "dtype": "bfloat16",
             "weight": 1.0, "devices": ["cuda"]}
        )  # fmt: skip
    config = ", ".join(f"{k} {v}" for k, v in arch.published.items())
    spec: dict[str, Any] = {
        "name": layer.name,
        "level": layer.level,
        "summary": f"{arch.title}: {layer.summary}.",
        "tags": ["layer", "published-config", arch.slug.split("-")[0], arch.slug, *layer.tags, layer.phase],
        "weight": WEIGHT,
        "convention": "return",
        "outputs": ["output", "k_new", "v_new"] if "cache" in layer.groups else ["output"],
        "bytes": moved,
        "flops": flops,
        **({"unchecked": layer.unchecked} if layer.unchecked else {}),
        "provenance": {
            "framework": "pytorch",
            "operator": f"{layer.entry} (plain PyTorch from the published architecture; gpuarena.dataset.layer_ops)",
            "models": [f"{arch.title} ({arch.source}: {config}); published config, not a harvest measurement"],
        },
    }
    tolerance = {
        **(RESIDUAL_STREAM if layer.entry == "decoder_layer" or "router" in layer.groups else {}),
        **TOLERANCE.get(layer.name, {}),
    }
    if tolerance:
        spec["tolerance"] = {"bfloat16": {**DEFAULT_BF16, **tolerance}}
    spec["workloads"] = workloads
    return spec


def write_layer(layer: Layer, root: Path) -> Path:
    """Write one problem folder (replacing an earlier one)."""
    return written.write_folder(
        Path(root) / f"level{layer.level}" / layer.name, problem_spec(layer), reference_source(layer)
    )


def write(root: Path, layers: list[Layer] | None = None) -> list[Path]:
    """Write every layer problem under root (layer-* folders of earlier runs that are no longer
    made are removed), and list them in root/dataset.json where root is a dataset."""
    if layers is None:
        written.clear(root, PREFIX)
    chosen = LAYERS if layers is None else layers
    folders = [write_layer(layer, root) for layer in chosen]
    written.register(root, {f"level{layer.level}/{layer.name}": ARCHS[layer.arch].title for layer in chosen})
    return folders
