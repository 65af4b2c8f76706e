"""The published configs the level-2 fusion problems quote (dataset/fusions.py): each model's
name, where its config is published, and the numbers of it that its fusions use, by the
config's own key names (a paper's table where the model has no config file)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """One model as published."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slug: str
    """Short name in problem names: fusion-<slug>-<part>."""
    title: str
    source: str
    published: dict[str, Any]


_DEEPSEEK_YARN = "yarn, factor 40, original_max_position_embeddings 4096, beta_fast 32, beta_slow 1, mscale 1.0"

MODELS: dict[str, Model] = {
    m.slug: m
    for m in [
        Model(slug="llama3-8b", title="Llama-3-8B", source="meta-llama/Meta-Llama-3-8B config.json",
              published={"hidden_size": 4096, "intermediate_size": 14336, "hidden_act": "silu", "num_attention_heads": 32,
                         "num_key_value_heads": 8, "rope_theta": 500000.0, "max_position_embeddings": 8192,
                         "vocab_size": 128256}),
        Model(slug="llama3-8b-instruct", title="Llama-3-8B-Instruct",
              source="meta-llama/Meta-Llama-3-8B-Instruct generation_config.json and config.json",
              published={"temperature": 0.6, "top_p": 0.9, "vocab_size": 128256}),
        Model(slug="llama3_1-8b", title="Llama-3.1-8B", source="meta-llama/Llama-3.1-8B config.json",
              published={"num_attention_heads": 32, "num_key_value_heads": 8, "rope_theta": 500000.0,
                         "rope_scaling": "llama3, factor 8.0, low_freq_factor 1.0, high_freq_factor 4.0, "
                         "original_max_position_embeddings 8192", "max_position_embeddings": 131072}),
        Model(slug="gemma2-9b", title="Gemma-2-9B", source="google/gemma-2-9b config.json",
              published={"hidden_size": 3584, "intermediate_size": 14336, "hidden_activation": "gelu_pytorch_tanh",
                         "num_attention_heads": 16, "head_dim": 256, "query_pre_attn_scalar": 256,
                         "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0, "vocab_size": 256000}),
        Model(slug="gpt-oss-20b", title="gpt-oss-20b", source="openai/gpt-oss-20b config.json",
              published={"hidden_size": 2880, "intermediate_size": 2880, "num_local_experts": 32,
                         "num_experts_per_tok": 4, "swiglu_limit": 7.0, "alpha (modeling code)": 1.702,
                         "num_attention_heads": 64, "head_dim": 64, "attention sinks": "one per head"}),
        Model(slug="bert-base", title="BERT-base-uncased", source="google-bert/bert-base-uncased config.json",
              published={"hidden_size": 768, "intermediate_size": 3072, "hidden_act": "gelu", "num_attention_heads": 12,
                         "vocab_size": 30522, "max_position_embeddings": 512, "type_vocab_size": 2}),
        Model(slug="gpt2", title="GPT-2 (124M)", source="openai-community/gpt2 config.json",
              published={"n_embd": 768, "n_inner": "None (4 * n_embd = 3072)", "activation_function": "gelu_new",
                         "n_head": 12, "n_ctx": 1024, "scale_attn_weights": True}),
        Model(slug="mobilenetv3-large", title="MobileNetV3-Large",
              source="torchvision mobilenet_v3_large, Howard et al. 2019 Table 1",
              published={"input": "14x14", "exp size": 672, "nonlinearity": "hard-swish", "SE": True}),
        Model(slug="efficientnet-b0", title="EfficientNet-B0", source="google/efficientnet-b0 config.json",
              published={"in_channels": [32, 16, 24, 40, 80, 112, 192], "expand_ratios": [1, 6, 6, 6, 6, 6, 6],
                         "kernel_sizes": [3, 3, 5, 3, 5, 5, 3], "squeeze_expansion_ratio": 0.25, "image_size": 224}),
        Model(slug="convnext-tiny", title="ConvNeXt-T", source="facebook/convnext-tiny-224 config.json",
              published={"hidden_sizes": [96, 192, 384, 768], "depths": [3, 3, 9, 3], "layer_scale_init_value": 1e-6,
                         "image_size": 224}),
        Model(slug="gpt-j-6b", title="GPT-J-6B", source="EleutherAI/gpt-j-6b config.json",
              published={"n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048}),
        Model(slug="phi-2", title="Phi-2", source="microsoft/phi-2 config.json",
              published={"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4,
                         "rope_theta": 10000.0, "max_position_embeddings": 2048, "torch_dtype": "float16"}),
        Model(slug="qwen2-vl-7b", title="Qwen2-VL-7B-Instruct", source="Qwen/Qwen2-VL-7B-Instruct config.json",
              published={"hidden_size": 3584, "num_attention_heads": 28, "num_key_value_heads": 4,
                         "rope_theta": 1000000.0, "rope_scaling": "mrope, mrope_section [16, 24, 24]",
                         "max_position_embeddings": 32768}),
        Model(slug="deepseek-v3", title="DeepSeek-V3", source="deepseek-ai/DeepSeek-V3 config.json",
              published={"hidden_size": 7168, "num_attention_heads": 128, "qk_nope_head_dim": 128,
                         "qk_rope_head_dim": 64, "rope_theta": 10000, "rope_scaling": _DEEPSEEK_YARN,
                         "max_position_embeddings": 163840, "n_routed_experts": 256, "num_experts_per_tok": 8,
                         "n_group": 8, "topk_group": 4, "scoring_func": "sigmoid", "routed_scaling_factor": 2.5,
                         "norm_topk_prob": True, "quantization_config": "fp8, e4m3, activation_scheme dynamic, "
                         "weight_block_size [128, 128]"}),
        Model(slug="bloom-7b1", title="BLOOM-7b1", source="bigscience/bloom-7b1 config.json",
              published={"hidden_size": 4096, "n_head": 32, "positions": "ALiBi", "seq_length": 2048}),
        Model(slug="mistral-7b", title="Mistral-7B-v0.1", source="mistralai/Mistral-7B-v0.1 config.json",
              published={"hidden_size": 4096, "num_attention_heads": 32, "sliding_window": 4096}),
        Model(slug="mixtral-8x7b", title="Mixtral-8x7B-v0.1", source="mistralai/Mixtral-8x7B-v0.1 config.json",
              published={"hidden_size": 4096, "num_local_experts": 8, "num_experts_per_tok": 2}),
        Model(slug="llama4-scout", title="Llama-4-Scout-17B-16E",
              source="meta-llama/Llama-4-Scout-17B-16E config.json (text_config)",
              published={"hidden_size": 5120, "num_local_experts": 16, "num_experts_per_tok": 1}),
        Model(slug="qwen3-30b-a3b", title="Qwen3-30B-A3B", source="Qwen/Qwen3-30B-A3B config.json",
              published={"hidden_size": 2048, "num_experts": 128, "num_experts_per_tok": 8}),
        Model(slug="qwen2_5-7b-instruct", title="Qwen2.5-7B-Instruct",
              source="Qwen/Qwen2.5-7B-Instruct generation_config.json and config.json",
              published={"temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.05,
                         "vocab_size": 152064}),
        Model(slug="qwen2_5-7b-instruct-awq", title="Qwen2.5-7B-Instruct-AWQ",
              source="Qwen/Qwen2.5-7B-Instruct-AWQ config.json",
              published={"hidden_size": 3584, "intermediate_size": 18944,
                         "quantization_config": "awq, bits 4, group_size 128, zero_point true, version gemm"}),
        Model(slug="vit-b16", title="ViT-Base/16", source="google/vit-base-patch16-224 config.json",
              published={"hidden_size": 768, "image_size": 224, "patch_size": 16}),
        Model(slug="swin-tiny", title="Swin-T", source="microsoft/swin-tiny-patch4-window7-224 config.json",
              published={"embed_dim": 96, "depths": [2, 2, 6, 2], "window_size": 7, "patch_size": 4,
                         "image_size": 224}),
        Model(slug="mamba-2_8b", title="Mamba-2.8B", source="state-spaces/mamba-2.8b config.json",
              published={"d_model": 2560, "n_layer": 64, "expand (default)": 2, "d_state (default)": 16}),
        Model(slug="rwkv4-7b", title="RWKV-4-Pile-7B", source="RWKV/rwkv-4-7b-pile config.json",
              published={"hidden_size": 4096, "attention_hidden_size": 4096, "context_length": 1024,
                         "num_hidden_layers": 32}),
    ]
}  # fmt: skip
