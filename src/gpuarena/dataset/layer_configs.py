"""The published configs that whole-layer problems are built from (dataset/layers.py).

`published` holds the numbers as each model's own config.json names them (the Hugging Face
repository in `source`); `cfg` the constants the reference uses; `full` the real size of a
workload (the model's widths, a prefill or decode shape that fits one 141 GB GPU several times
over) and `small` the same structure shrunk for a CPU: fewer heads with the same head size and
the same query heads per KV head, narrower widths, fewer experts with the same top-k.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Arch(BaseModel):
    """One model's architecture as published."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slug: str
    """Short name in problem names: layer-<slug>-<part>."""
    title: str
    """The model's published name."""
    source: str
    """Where the config is published."""
    published: dict[str, Any]
    """The config's own numbers, by its key names."""
    cfg: dict[str, Any]
    """Constants the reference reads (eps, rope theta, head_dim, top-k, ...)."""
    full: dict[str, int]
    """Axes of the real-size workload."""
    small: dict[str, int]
    """Axes of the CPU workload: the same structure, shrunk."""


def _llm(hidden: int, heads: int, kv: int, head_dim: int, inter: int, **extra: int) -> dict[str, int]:
    return {"hidden": hidden, "heads": heads, "kv_heads": kv, "head_dim": head_dim, "inter": inter, **extra}


PREFILL = {"batch": 1, "seq": 2048}
SMALL = {"batch": 2, "seq": 64}

ARCHS: dict[str, Arch] = {
    a.slug: a
    for a in [
        Arch(
            slug="llama3-8b",
            title="Llama-3-8B",
            source="meta-llama/Meta-Llama-3-8B config.json",
            published={
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "rope_theta": 500000.0,
                "rms_norm_eps": 1e-5,
            },
            cfg={"eps": 1e-5, "rope_theta": 500000.0, "head_dim": 128, "act": "silu"},
            full={**PREFILL, **_llm(4096, 32, 8, 128, 14336)},
            small={**SMALL, **_llm(512, 4, 1, 128, 1792)},
        ),
        Arch(
            slug="qwen2_5-7b",
            title="Qwen2.5-7B",
            source="Qwen/Qwen2.5-7B config.json",
            published={
                "hidden_size": 3584,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "intermediate_size": 18944,
                "rope_theta": 1000000.0,
                "rms_norm_eps": 1e-6,
                "attention_bias (q, k, v)": True,
            },
            cfg={"eps": 1e-6, "rope_theta": 1000000.0, "head_dim": 128, "act": "silu"},
            full={**PREFILL, **_llm(3584, 28, 4, 128, 18944)},
            small={**SMALL, **_llm(896, 7, 1, 128, 4736)},
        ),
        Arch(
            slug="mistral-7b",
            title="Mistral-7B-v0.1",
            source="mistralai/Mistral-7B-v0.1 config.json",
            published={
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-5,
                "sliding_window": 4096,
            },
            cfg={"eps": 1e-5, "rope_theta": 10000.0, "head_dim": 128, "act": "silu"},
            full={"batch": 1, "seq": 8192, "window": 4096, **_llm(4096, 32, 8, 128, 14336)},
            small={"batch": 1, "seq": 128, "window": 64, **_llm(512, 4, 1, 128, 1792)},
        ),
        Arch(
            slug="gemma2-9b",
            title="Gemma-2-9B",
            source="google/gemma-2-9b config.json",
            published={
                "hidden_size": 3584,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "head_dim": 256,
                "intermediate_size": 14336,
                "query_pre_attn_scalar": 256,
                "attn_logit_softcapping": 50.0,
                "hidden_activation": "gelu_pytorch_tanh",
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-6,
            },
            cfg={
                "eps": 1e-6,
                "rope_theta": 10000.0,
                "head_dim": 256,
                "query_scale": 256,
                "softcap": 50.0,
                "norm_offset": 1.0,
                "act": "gelu_tanh",
            },
            full={**PREFILL, **_llm(3584, 16, 8, 256, 14336)},
            small={**SMALL, **_llm(448, 2, 1, 256, 1792)},
        ),
        Arch(
            slug="phi3-mini",
            title="Phi-3-mini-4k-instruct",
            source="microsoft/Phi-3-mini-4k-instruct config.json",
            published={
                "hidden_size": 3072,
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
                "intermediate_size": 8192,
                "rope_theta": 10000.0,
                "rms_norm_eps": 1e-5,
                "sliding_window": 2047,
            },
            cfg={"eps": 1e-5, "rope_theta": 10000.0, "head_dim": 96, "group": 1, "act": "silu"},
            full={**PREFILL, "window": 2047, **_llm(3072, 32, 32, 96, 8192)},
            small={**SMALL, "window": 63, **_llm(384, 4, 4, 96, 1024)},
        ),
        Arch(
            slug="mixtral-8x7b",
            title="Mixtral-8x7B-v0.1",
            source="mistralai/Mixtral-8x7B-v0.1 config.json",
            published={
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "num_local_experts": 8,
                "num_experts_per_tok": 2,
                "rope_theta": 1000000.0,
                "rms_norm_eps": 1e-5,
            },
            cfg={"eps": 1e-5, "rope_theta": 1000000.0, "head_dim": 128, "top_k": 2, "norm_topk": True},
            full={**PREFILL, **_llm(4096, 32, 8, 128, 0, experts=8, moe_inter=14336)},
            small={**SMALL, **_llm(512, 4, 1, 128, 0, experts=8, moe_inter=1792)},
        ),
        Arch(
            slug="qwen3-30b-a3b",
            title="Qwen3-30B-A3B (Qwen3-MoE)",
            source="Qwen/Qwen3-30B-A3B config.json",
            published={
                "hidden_size": 2048,
                "num_attention_heads": 32,
                "num_key_value_heads": 4,
                "head_dim": 128,
                "moe_intermediate_size": 768,
                "num_experts": 128,
                "num_experts_per_tok": 8,
                "norm_topk_prob": True,
                "rope_theta": 1000000.0,
                "rms_norm_eps": 1e-6,
            },
            cfg={"eps": 1e-6, "rope_theta": 1000000.0, "head_dim": 128, "top_k": 8, "norm_topk": True},
            full={**PREFILL, **_llm(2048, 32, 4, 128, 0, experts=128, moe_inter=768)},
            small={**SMALL, **_llm(256, 8, 1, 128, 0, experts=16, moe_inter=96)},
        ),
        Arch(
            slug="qwen1_5-moe-a2_7b",
            title="Qwen1.5-MoE-A2.7B",
            source="Qwen/Qwen1.5-MoE-A2.7B config.json",
            published={
                "hidden_size": 2048,
                "moe_intermediate_size": 1408,
                "shared_expert_intermediate_size": 5632,
                "num_experts": 60,
                "num_experts_per_tok": 4,
                "norm_topk_prob": False,
            },
            cfg={"top_k": 4, "norm_topk": False},
            full={**PREFILL, "hidden": 2048, "experts": 60, "moe_inter": 1408, "shared_inter": 5632},
            small={**SMALL, "hidden": 256, "experts": 12, "moe_inter": 176, "shared_inter": 704},
        ),
        Arch(
            slug="deepseek-v3",
            title="DeepSeek-V3",
            source="deepseek-ai/DeepSeek-V3 config.json",
            published={
                "hidden_size": 7168,
                "num_attention_heads": 128,
                "q_lora_rank": 1536,
                "kv_lora_rank": 512,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "moe_intermediate_size": 2048,
                "n_routed_experts": 256,
                "n_shared_experts": 1,
                "num_experts_per_tok": 8,
                "n_group": 8,
                "topk_group": 4,
                "scoring_func": "sigmoid",
                "routed_scaling_factor": 2.5,
                "norm_topk_prob": True,
                "rope_theta": 10000,
                "rope_scaling": "yarn, factor 40, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, "
                "mscale 1.0, mscale_all_dim 1.0",
                "rms_norm_eps": 1e-6,
            },
            cfg={
                "eps": 1e-6,
                "rope_theta": 10000.0,
                "nope": 128,
                "rope": 64,
                "v_dim": 128,
                "yarn": {
                    "factor": 40.0,
                    "original_max_position": 4096,
                    "beta_fast": 32,
                    "beta_slow": 1,
                    "mscale_all_dim": 1.0,
                },
                "top_k": 8,
                "scoring": "sigmoid",
                "n_group": 8,
                "topk_group": 4,
                "norm_topk": True,
                "routed_scale": 2.5,
            },
            full={
                **PREFILL,
                "hidden": 7168,
                "heads": 128,
                "q_rank": 1536,
                "kv_rank": 512,
                "qk_dim": 192,
                "kv_a_dim": 576,
                "kvb_dim": 256,
                "v_dim": 128,
                "experts": 256,
                "moe_inter": 2048,
                "shared_inter": 2048,
            },
            small={
                **SMALL,
                "hidden": 448,
                "heads": 4,
                "q_rank": 96,
                "kv_rank": 32,
                "qk_dim": 192,
                "kv_a_dim": 96,
                "kvb_dim": 256,
                "v_dim": 128,
                "experts": 32,
                "moe_inter": 128,
                "shared_inter": 128,
            },
        ),
        Arch(
            slug="deepseek-v2-lite",
            title="DeepSeek-V2-Lite",
            source="deepseek-ai/DeepSeek-V2-Lite config.json",
            published={
                "hidden_size": 2048,
                "num_attention_heads": 16,
                "q_lora_rank": None,
                "kv_lora_rank": 512,
                "qk_nope_head_dim": 128,
                "qk_rope_head_dim": 64,
                "v_head_dim": 128,
                "moe_intermediate_size": 1408,
                "n_routed_experts": 64,
                "n_shared_experts": 2,
                "num_experts_per_tok": 6,
                "scoring_func": "softmax",
                "routed_scaling_factor": 1.0,
                "norm_topk_prob": False,
                "rope_theta": 10000,
                "rope_scaling": "yarn, factor 40, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, "
                "mscale 0.707, mscale_all_dim 0.707",
                "rms_norm_eps": 1e-6,
            },
            cfg={
                "eps": 1e-6,
                "rope_theta": 10000.0,
                "nope": 128,
                "rope": 64,
                "v_dim": 128,
                "yarn": {
                    "factor": 40.0,
                    "original_max_position": 4096,
                    "beta_fast": 32,
                    "beta_slow": 1,
                    "mscale_all_dim": 0.707,
                },
                "top_k": 6,
                "norm_topk": False,
            },
            full={
                **PREFILL,
                "hidden": 2048,
                "heads": 16,
                "kv_rank": 512,
                "qk_dim": 192,
                "kv_a_dim": 576,
                "kvb_dim": 256,
                "v_dim": 128,
                "experts": 64,
                "moe_inter": 1408,
                "shared_inter": 2816,
            },
            small={
                **SMALL,
                "hidden": 256,
                "heads": 2,
                "kv_rank": 64,
                "qk_dim": 192,
                "kv_a_dim": 128,
                "kvb_dim": 256,
                "v_dim": 128,
                "experts": 16,
                "moe_inter": 176,
                "shared_inter": 352,
            },
        ),
        Arch(
            slug="bert-base",
            title="BERT-base-uncased",
            source="google-bert/bert-base-uncased config.json",
            published={
                "hidden_size": 768,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "hidden_act": "gelu",
                "layer_norm_eps": 1e-12,
            },
            cfg={"eps": 1e-12, "head_dim": 64, "causal": False, "post_norm": True},
            full={"batch": 32, "seq": 512, **_llm(768, 12, 12, 64, 3072)},
            small={"batch": 2, "seq": 64, **_llm(192, 3, 3, 64, 768)},
        ),
        Arch(
            slug="vit-b16",
            title="ViT-Base/16 (google/vit-base-patch16-224)",
            source="google/vit-base-patch16-224 config.json",
            published={
                "hidden_size": 768,
                "num_attention_heads": 12,
                "intermediate_size": 3072,
                "hidden_act": "gelu",
                "layer_norm_eps": 1e-12,
                "image_size": 224,
                "patch_size": 16,
            },
            cfg={"eps": 1e-12, "head_dim": 64, "causal": False},
            full={"batch": 64, "seq": 197, **_llm(768, 12, 12, 64, 3072)},
            small={"batch": 2, "seq": 50, **_llm(192, 3, 3, 64, 768)},
        ),
        Arch(
            slug="resnet50",
            title="ResNet-50 (torchvision v1.5, microsoft/resnet-50)",
            source="microsoft/resnet-50 config.json",
            published={
                "layer_type": "bottleneck",
                "depths": [3, 4, 6, 3],
                "hidden_sizes": [256, 512, 1024, 2048],
                "downsample_in_bottleneck": False,
                "batch_norm_eps": 1e-5,
            },
            cfg={"eps": 1e-5},
            full={"batch": 64, "size": 56, "cin": 256, "mid": 64, "cout": 256},
            small={"batch": 2, "size": 16, "cin": 64, "mid": 16, "cout": 64},
        ),
        Arch(
            slug="efficientnet-b0",
            title="EfficientNet-B0",
            source="google/efficientnet-b0 config.json",
            published={
                "width_coefficient": 1.0,
                "depth_coefficient": 1.0,
                "image_size": 224,
                "kernel_sizes": [3, 3, 5, 3, 5, 5, 3],
                "in_channels": [32, 16, 24, 40, 80, 112, 192],
                "out_channels": [16, 24, 40, 80, 112, 192, 320],
                "expand_ratios": [1, 6, 6, 6, 6, 6, 6],
                "strides": [1, 2, 2, 2, 1, 2, 1],
                "squeeze_expansion_ratio": 0.25,
                "hidden_act": "swish",
                "batch_norm_eps": 0.001,
            },
            cfg={"eps": 1e-3, "act": "silu"},
            full={"batch": 64, "size": 14, "cin": 80, "mid": 480, "se": 20},
            small={"batch": 2, "size": 8, "cin": 16, "mid": 96, "se": 4},
        ),
        Arch(
            slug="mobilenet-v2",
            title="MobileNetV2 1.0 224",
            source="google/mobilenet_v2_1.0_224 config.json",
            published={
                "depth_multiplier": 1.0,
                "expand_ratio": 6.0,
                "image_size": 224,
                "hidden_act": "relu6",
                "layer_norm_eps": 0.001,
            },
            cfg={"eps": 1e-3, "act": "relu6"},
            full={"batch": 64, "size": 14, "cin": 64, "mid": 384},
            small={"batch": 2, "size": 8, "cin": 16, "mid": 96},
        ),
    ]
}
