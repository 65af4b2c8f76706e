"""The level-2 fusions that dataset/fusions.py writes: each one a computation of a published
model (dataset/fusion_models.py) between its matrix multiplies, with its inputs, constants and
workloads. `family` is its coarse op family (activation, rotary, attention, routing, lm-head,
embedding, data-movement, quantization, recurrence): the issue asks that none holds more than a
third of a level's distinct computations, and docs/dataset.md counts them.

Inputs, by name in reference()'s order: a shape (axis names or their products), how it is drawn
(fusion_ops.draw's kinds) and that kind's settings. The real-size workload runs on the GPU in the
model's dtype, `small` (the same structure, shrunk) on the CPU too.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Fusion(BaseModel):
    """One problem to write."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    part: str
    """The name's last part: fusion-<model>-<part>."""
    model: str
    entry: str
    """The function of the fusion_ops modules that the reference calls."""
    family: str
    summary: str
    inputs: dict[str, dict[str, Any]]
    full: dict[str, int]
    small: dict[str, int]
    label: str
    """The real-size workload's name: <model>-<label>."""
    moved: str
    """Bytes: every input read once (rows gathered: those read), every output written once."""
    flops: str
    """Elementwise operations, one each (exp, tanh, erf as one); 0 where it only moves data."""
    cfg: dict[str, Any] = {}
    outputs: list[str] = ["output"]
    dtype: str = "bfloat16"
    tolerance: dict[str, float] = {}

    @property
    def name(self) -> str:
        return f"fusion-{self.model}-{self.part}"


def _in(shape: str, init: str, **settings: Any) -> dict[str, Any]:
    return {"shape": shape.split(), "init": init, **settings}


def _f(
    part: str,
    model: str,
    entry: str,
    family: str,
    summary: str,
    inputs: dict[str, dict[str, Any]],
    axes: tuple[dict[str, int], dict[str, int]],
    label: str,
    moved: str,
    flops: str,
    **kw: Any,
) -> Fusion:
    return Fusion(part=part, model=model, entry=entry, family=family, summary=summary, inputs=inputs,
                  full=axes[0], small=axes[1], label=label, moved=moved, flops=flops, **kw)  # fmt: skip


F32 = {"dtype": "float32"}
FP8_TIES = {"outside": 0.002}
"""fp8 quantization's tolerance: bfloat16 inputs over a bfloat16 amax land exactly on e4m3's
rounding midpoints often, where an honest kernel's x * (448 / amax) rounds the other way than
x / (amax / 448): 0.05-0.08% of the elements of the real-size workload, one e4m3 step each
(measured on the CPU). Twice that may fall outside; the L2 bound holds over all of them."""
FAR_POSITIONS = {"outside": 1e-05}
"""Rotary embeddings computed from positions up to 131072 or 163840: float32's step there is 0.008
to 0.016 radians, so an angle rounded once more or less (torch.compile's, on an H200) turns a
large element past the bound: 4 of 10.5 million (Llama-3.1) and 190 of 100 million (DeepSeek's
MLA) elements of the real-size workloads. Up to 1e-5 of them may fall outside; the small
workloads, where that is no element, draw positions below 8192 (float32's step 0.0005 there)."""
_ACT, _ROT, _ATT, _ROUTE, _HEAD = "activation", "rotary", "attention", "routing", "lm-head"
_EMB, _MOVE, _QUANT, _REC = "embedding", "data-movement", "quantization", "recurrence"
_TOKENS = {"tokens": 2048}
_SCORES = "batch heads seq seq"
_SOFTMAX_BYTES = "2*batch*heads*seq*seq*dtype_bytes"
_QK = {"query": _in("batch heads seq head_dim", "act"), "key": _in("batch kv_heads seq head_dim", "act")}
_QK_BYTES = "2*batch*(heads+kv_heads)*seq*head_dim*dtype_bytes"
_DEEPSEEK_YARN = {"factor": 40.0, "original_max_position": 4096, "beta_fast": 32, "beta_slow": 1, "mscale_all_dim": 1.0}
_LLAMA3_SCALING = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

FUSIONS: list[Fusion] = [
    # activations and their gates
    _f("silu-and-mul", "llama3-8b", "silu_and_mul", _ACT, "SwiGLU's gate silu(gate) * up from the merged gate_up projection",
       {"gate_up": _in("tokens 2*inter", "act")}, ({**_TOKENS, "inter": 14336}, {"tokens": 64, "inter": 448}),
       "prefill-2048", "3*tokens*inter*dtype_bytes", "5*tokens*inter"),
    _f("gelu-tanh-and-mul", "gemma2-9b", "gelu_tanh_and_mul", _ACT, "GeGLU's gate: tanh-approximated GELU of the gate projection times the up projection",
       {"gate": _in("tokens inter", "act"), "up": _in("tokens inter", "act")}, ({**_TOKENS, "inter": 14336}, {"tokens": 64, "inter": 448}),
       "prefill-2048", "3*tokens*inter*dtype_bytes", "10*tokens*inter"),
    _f("clamped-swiglu", "gpt-oss-20b", "silu_alpha_clamped_and_mul", _ACT, "The experts' clamped SwiGLU: interleaved gate and up clamped at 7, gate * sigmoid(1.702 gate) * (up + 1)",
       {"gate_up": _in("tokens*top_k 2*inter", "act", scale=4.0)}, ({**_TOKENS, "top_k": 4, "inter": 2880}, {"tokens": 16, "top_k": 4, "inter": 360}),
       "prefill-2048x4", "3*tokens*top_k*inter*dtype_bytes", "9*tokens*top_k*inter", cfg={"swiglu_limit": 7.0, "alpha": 1.702}),
    _f("bias-gelu", "bert-base", "bias_gelu", _ACT, "The intermediate dense's bias and exact (erf) GELU",
       {"x": _in("tokens inter", "act"), "bias": _in("inter", "normal", scale=0.5)}, ({"tokens": 16384, "inter": 3072}, {"tokens": 128, "inter": 384}),
       "32x512", "(2*tokens*inter + inter)*dtype_bytes", "10*tokens*inter"),
    _f("bias-gelu-new", "gpt2", "bias_gelu_tanh", _ACT, "The c_fc bias and gelu_new as its tanh formula, in float32 as the model runs",
       {"x": _in("tokens inter", "act"), "bias": _in("inter", "normal", scale=0.5)}, ({"tokens": 8192, "inter": 3072}, {"tokens": 128, "inter": 384}),
       "8x1024", "(2*tokens*inter + inter)*dtype_bytes", "12*tokens*inter", dtype="float32"),
    _f("bias-hardswish", "mobilenetv3-large", "channel_bias_hardswish", _ACT, "A convolution's folded batch-norm bias per channel and hard-swish (float16 inference)",
       {"x": _in("batch channels size size", "act", scale=2.0), "bias": _in("channels", "normal", scale=0.5)},
       ({"batch": 128, "channels": 672, "size": 14}, {"batch": 2, "channels": 32, "size": 14}),
       "batch128-672x14x14", "(2*batch*channels*size*size + channels)*dtype_bytes", "6*batch*channels*size*size", dtype="float16"),
    _f("squeeze-excite-scale", "efficientnet-b0", "squeeze_excite_scale", _ACT, "Squeeze-and-excitation's channel scaling by the sigmoid of the excitation (480 channels at 14x14, float16)",
       {"x": _in("batch channels size size", "act"), "excite": _in("batch channels", "normal", scale=2.0)},
       ({"batch": 128, "channels": 480, "size": 14}, {"batch": 2, "channels": 32, "size": 14}),
       "batch128-480x14x14", "(2*batch*channels*size*size + batch*channels)*dtype_bytes", "batch*channels*size*size + 4*batch*channels", dtype="float16"),
    # rotary embeddings
    _f("rotary-cached", "llama3-8b", "rotary_cached_qk", _ROT, "RoPE on q and k with cos and sin gathered from a cache by each token's position (vLLM's layout)",
       {"positions": _in("tokens", "int", high="max_positions"), "query": _in("tokens heads*head_dim", "act"),
        "key": _in("tokens kv_heads*head_dim", "act"), "cos_sin_cache": _in("max_positions head_dim", "angles", **F32)},
       ({**_TOKENS, "heads": 32, "kv_heads": 8, "head_dim": 128, "max_positions": 8192}, {"tokens": 64, "heads": 4, "kv_heads": 1, "head_dim": 128, "max_positions": 256}),
       "prefill-2048", "2*tokens*(heads+kv_heads)*head_dim*dtype_bytes + tokens*(8 + 4*head_dim)", "3*tokens*(heads+kv_heads)*head_dim",
       cfg={"head_dim": 128}, outputs=["query", "key"]),
    _f("rotary-interleaved-partial", "gpt-j-6b", "rotary_interleaved_partial", _ROT, "RoPE by adjacent pairs on the first 64 of each head's 256 dims, q and k",
       {"query": _in("batch seq heads head_dim", "act"), "key": _in("batch seq heads head_dim", "act")},
       ({"batch": 1, "seq": 2048, "heads": 16, "head_dim": 256}, {"batch": 2, "seq": 64, "heads": 2, "head_dim": 256}),
       "prefill-2048", "4*batch*seq*heads*head_dim*dtype_bytes", "6*batch*seq*heads*64",
       cfg={"rotary_dim": 64, "rope_theta": 10000.0}, outputs=["query", "key"]),
    _f("rotary-partial", "phi-2", "rotary_partial_halves", _ROT, "RoPE by halves on the first 32 of each head's 80 dims (partial_rotary_factor 0.4) at given position ids",
       {"query": _in("batch heads seq head_dim", "act"), "key": _in("batch heads seq head_dim", "act"), "position_ids": _in("batch seq", "offsets", high="max_positions")},
       ({"batch": 4, "heads": 32, "seq": 1024, "head_dim": 80, "max_positions": 2048}, {"batch": 2, "heads": 4, "seq": 64, "head_dim": 80, "max_positions": 256}),
       "4x1024", "4*batch*heads*seq*head_dim*dtype_bytes + 8*batch*seq", "6*batch*heads*seq*32",
       cfg={"rotary_dim": 32, "rope_theta": 10000.0}, outputs=["query", "key"], dtype="float16"),
    _f("rotary-llama3-scaled", "llama3_1-8b", "rotary_llama3_scaled", _ROT, "RoPE with the llama3 frequency scaling (factor 8, low/high frequency factors 1 and 4) computed from position ids up to 131072",
       {**_QK, "position_ids": _in("batch seq", "offsets", high="max_positions")},
       ({"batch": 1, "heads": 32, "kv_heads": 8, "seq": 2048, "head_dim": 128, "max_positions": 131072}, {"batch": 2, "heads": 4, "kv_heads": 1, "seq": 64, "head_dim": 128, "max_positions": 8192}),
       "prefill-2048", _QK_BYTES + " + 8*batch*seq", "3*batch*(heads+kv_heads)*seq*head_dim",
       cfg={"head_dim": 128, "rope_theta": 500000.0, "rope_scaling": _LLAMA3_SCALING}, outputs=["query", "key"], tolerance=FAR_POSITIONS),
    _f("rotary-multimodal", "qwen2-vl-7b", "rotary_multimodal_sections", _ROT, "M-RoPE: time, height and width position ids each turning their section (16, 24, 24) of the frequencies",
       {**_QK, "position_ids": _in("3 batch seq", "offsets", high="max_positions")},
       ({"batch": 1, "heads": 28, "kv_heads": 4, "seq": 2048, "head_dim": 128, "max_positions": 32768}, {"batch": 2, "heads": 7, "kv_heads": 1, "seq": 64, "head_dim": 128, "max_positions": 4096}),
       "prefill-2048", _QK_BYTES + " + 24*batch*seq", "3*batch*(heads+kv_heads)*seq*head_dim",
       cfg={"rope_theta": 1000000.0, "mrope_section": [16, 24, 24]}, outputs=["query", "key"]),
    _f("mla-rotary-split-concat", "deepseek-v3", "mla_rotary_split_concat", _ROT, "MLA's rotary step: q's 64 rope dims and the shared k_pe turned with YaRN frequencies, q reassembled, k_pe broadcast beside every head's k_nope",
       {"q": _in("tokens heads qk_dim", "act"), "k_nope": _in("tokens heads nope", "act"), "k_pe": _in("tokens rope", "act"), "positions": _in("tokens", "int", high="max_positions")},
       ({**_TOKENS, "heads": 128, "qk_dim": 192, "nope": 128, "rope": 64, "max_positions": 163840}, {"tokens": 32, "heads": 4, "qk_dim": 192, "nope": 128, "rope": 64, "max_positions": 8192}),
       "prefill-2048", "(3*tokens*heads*qk_dim + tokens*heads*nope + tokens*rope)*dtype_bytes + 8*tokens", "3*tokens*(heads+1)*rope",
       cfg={"nope": 128, "rope": 64, "rope_theta": 10000.0, "yarn": _DEEPSEEK_YARN}, outputs=["query", "key"], tolerance=FAR_POSITIONS),
    # attention without its matrix multiplies
    _f("scaled-masked-softmax", "bert-base", "scaled_masked_softmax", _ATT, "Attention probabilities: scores scaled by 1/8, padded keys masked per sequence, softmax",
       {"scores": _in(_SCORES, "normal", scale=16.0), "attention_mask": _in("batch seq", "prefix")},
       ({"batch": 32, "heads": 12, "seq": 512}, {"batch": 2, "heads": 3, "seq": 64}),
       "32x512", _SOFTMAX_BYTES + " + 8*batch*seq", "5*batch*heads*seq*seq", cfg={"head_dim": 64}),
    _f("scaled-causal-softmax", "gpt2", "scaled_causal_softmax", _ATT, "Attention probabilities: scores scaled by 1/8, causal mask, softmax (float32)",
       {"scores": _in(_SCORES, "normal", scale=16.0)}, ({"batch": 8, "heads": 12, "seq": 1024}, {"batch": 2, "heads": 3, "seq": 64}),
       "8x1024", _SOFTMAX_BYTES, "5*batch*heads*seq*(seq+1)/2", cfg={"head_dim": 64}, dtype="float32"),
    _f("alibi-causal-softmax", "bloom-7b1", "alibi_causal_softmax", _ATT, "Attention probabilities with ALiBi: scaled scores plus each head's slope times the key position, causal mask, softmax",
       {"scores": _in(_SCORES, "normal", scale=24.0)}, ({"batch": 1, "heads": 32, "seq": 2048}, {"batch": 2, "heads": 4, "seq": 64}),
       "prefill-2048", _SOFTMAX_BYTES, "6*batch*heads*seq*(seq+1)/2", cfg={"head_dim": 128}),
    _f("sliding-window-softmax", "mistral-7b", "sliding_window_causal_softmax", _ATT, "Attention probabilities of a 2048-query chunk at the end of 8192 keys with a 4096-token sliding window",
       {"scores": _in("batch heads q_len kv_len", "normal", scale=24.0), "window": _in("window", "scalar")},
       ({"batch": 1, "heads": 32, "q_len": 2048, "kv_len": 8192, "window": 4096}, {"batch": 1, "heads": 4, "q_len": 32, "kv_len": 128, "window": 48}),
       "chunk-2048-of-8192", "2*batch*heads*q_len*kv_len*dtype_bytes", "5*batch*heads*q_len*window", cfg={"head_dim": 128}),
    _f("softcap-causal-softmax", "gemma2-9b", "softcap_causal_softmax", _ATT, "Attention probabilities: scores scaled by 256^-0.5, soft-capped at 50 by tanh, causal mask, softmax",
       {"scores": _in(_SCORES, "normal", scale=320.0)}, ({"batch": 1, "heads": 16, "seq": 4096}, {"batch": 2, "heads": 2, "seq": 64}),
       "prefill-4096", _SOFTMAX_BYTES, "8*batch*heads*seq*(seq+1)/2", cfg={"query_pre_attn_scalar": 256, "attn_logit_softcapping": 50.0}),
    _f("sink-causal-softmax", "gpt-oss-20b", "sink_causal_softmax", _ATT, "Attention probabilities with a learned sink logit per head that takes probability and gives no value, causal",
       {"scores": _in(_SCORES, "normal", scale=16.0), "sinks": _in("heads", "normal", scale=2.0, shift=3.0)},
       ({"batch": 1, "heads": 64, "seq": 2048}, {"batch": 2, "heads": 4, "seq": 64}),
       "prefill-2048", _SOFTMAX_BYTES + " + heads*dtype_bytes", "6*batch*heads*seq*(seq+1)/2", cfg={"head_dim": 64}),
    _f("merge-attention-states", "llama3-8b", "merge_attention_states", _ATT, "Two partial attention outputs over disjoint keys merged by their log-sum-exps (cascade, split-KV decoding)",
       {"v_a": _in("tokens heads head_dim", "act"), "lse_a": _in("tokens heads", "normal", scale=2.0, shift=6.0, **F32),
        "v_b": _in("tokens heads head_dim", "act"), "lse_b": _in("tokens heads", "normal", scale=2.0, shift=6.0, **F32)},
       ({"tokens": 4096, "heads": 32, "head_dim": 128}, {"tokens": 64, "heads": 4, "head_dim": 128}),
       "4096-tokens", "3*tokens*heads*head_dim*dtype_bytes + 12*tokens*heads", "4*tokens*heads*head_dim + 6*tokens*heads", outputs=["output", "lse"]),
    # MoE routers and the glue around the experts
    _f("router-top2", "mixtral-8x7b", "router_topk_rescale", _ROUTE, "The router after its gate: softmax over 8 experts, top-2, weights rescaled to sum to one",
       {"logits": _in("tokens experts", "ranked", scale=0.5)}, ({"tokens": 16384, "experts": 8}, {"tokens": 64, "experts": 8}),
       "8x2048", "tokens*experts*dtype_bytes + tokens*2*(dtype_bytes + 8)", "4*tokens*experts", cfg={"top_k": 2}, outputs=["weights", "ids"]),
    _f("router-grouped", "deepseek-v3", "router_sigmoid_grouped_topk", _ROUTE, "The router after its gate: sigmoid scores, a selection bias, the best 4 of 8 groups, top-8 of 256 experts, weights rescaled and x2.5",
       {"bias": _in("experts", "uniform", range=[-0.04, 0.04]), "logits": _in("tokens experts", "grouped", groups=8, bias="bias")},
       ({"tokens": 16384, "experts": 256}, {"tokens": 64, "experts": 64}),
       "8x2048", "4*tokens*experts + 4*experts + tokens*8*(4 + 8)", "6*tokens*experts",
       cfg={"top_k": 8, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5}, outputs=["weights", "ids"], dtype="float32"),
    _f("router-top1-scale-input", "llama4-scout", "router_top1_sigmoid_scale_input", _ROUTE, "The router after its gate: top-1 of 16 experts, the sigmoid of its logit scaling the token's hidden state",
       {"logits": _in("tokens experts", "ranked", scale=0.5), "hidden": _in("tokens hidden", "act")},
       ({**_TOKENS, "experts": 16, "hidden": 5120}, {"tokens": 64, "experts": 16, "hidden": 256}),
       "prefill-2048", "(tokens*experts + 2*tokens*hidden)*dtype_bytes + 8*tokens", "tokens*experts + tokens*hidden + 4*tokens",
       outputs=["scaled", "ids"]),
    _f("moe-permute", "qwen3-30b-a3b", "moe_token_permute", _ROUTE, "MoE dispatch: each token's hidden state copied to its 8 experts' rows, sorted by expert (stable), and each expert's end offset",
       {"hidden": _in("tokens hidden", "act"), "expert_ids": _in("tokens top_k", "distinct", of="experts"), "experts": _in("experts", "scalar")},
       ({**_TOKENS, "hidden": 2048, "top_k": 8, "experts": 128}, {"tokens": 64, "hidden": 256, "top_k": 8, "experts": 16}),
       "prefill-2048", "(tokens*hidden + tokens*top_k*hidden)*dtype_bytes + 8*(tokens*top_k + experts)", "0",
       outputs=["permuted", "expert_ends"]),
    _f("moe-unpermute-combine", "deepseek-v3", "moe_unpermute_weighted_sum", _ROUTE, "MoE combine: the experts' output rows put back by token and summed weighted by the router's 8 weights",
       {"expert_out": _in("tokens*top_k hidden", "act"), "order": _in("tokens*top_k", "perm", of="tokens*top_k"), "weights": _in("tokens top_k", "uniform", range=[0.05, 0.6], **F32)},
       ({**_TOKENS, "top_k": 8, "hidden": 7168}, {"tokens": 64, "top_k": 8, "hidden": 256}),
       "prefill-2048", "(tokens*top_k*hidden + tokens*hidden)*dtype_bytes + 12*tokens*top_k", "2*tokens*top_k*hidden"),
    # the language-model head's side
    _f("final-logit-softcap", "gemma2-9b", "final_logit_softcap", _HEAD, "The final logits soft-capped at 30 by tanh over the 256000-token vocabulary",
       {"logits": _in("tokens vocab", "normal", scale=15.0)}, ({**_TOKENS, "vocab": 256000}, {"tokens": 16, "vocab": 4096}),
       "prefill-2048", "2*tokens*vocab*dtype_bytes", "3*tokens*vocab", cfg={"final_logit_softcapping": 30.0}),
    _f("cross-entropy", "llama3-8b", "cross_entropy_per_token", _HEAD, "Each token's cross-entropy over the 128256-token vocabulary (logsumexp minus the target's logit), ignore_index -100",
       {"logits": _in("tokens vocab", "act", scale=2.0), "targets": _in("tokens", "targets", high="vocab", ignored=0.05)},
       ({"tokens": 4096, "vocab": 128256}, {"tokens": 64, "vocab": 2048}),
       "2x2048", "tokens*vocab*dtype_bytes + 12*tokens", "3*tokens*vocab", outputs=["loss"]),
    _f("sampling-top-k", "qwen2_5-7b-instruct", "sampling_temperature_topk_probs", _HEAD, "Sampling's distribution: logits / 0.7, all but the top 20 masked, softmax over the 152064-token vocabulary",
       {"logits": _in("batch vocab", "act", scale=2.0)}, ({"batch": 64, "vocab": 152064}, {"batch": 4, "vocab": 4096}),
       "decode-64", "2*batch*vocab*dtype_bytes", "4*batch*vocab", cfg={"temperature": 0.7, "top_k": 20}, dtype="float32"),
    _f("sampling-top-p", "llama3-8b-instruct", "sampling_top_p_probs", _HEAD, "Sampling's distribution: logits / 0.6, nucleus filtering at top_p 0.9 (sort, cumulative sum, cut), renormalised",
       {"logits": _in("batch vocab", "normal", scale=1.5)}, ({"batch": 64, "vocab": 128256}, {"batch": 4, "vocab": 4096}),
       "decode-64", "2*batch*vocab*dtype_bytes", "6*batch*vocab", cfg={"temperature": 0.6, "top_p": 0.9}, dtype="float32"),
    _f("repetition-penalty", "qwen2_5-7b-instruct", "repetition_penalty", _HEAD, "The repetition penalty 1.05 on the logits of every token already in each sequence's 4096-token context",
       {"logits": _in("batch vocab", "act", scale=2.0), "previous_ids": _in("batch context", "int", high="vocab")},
       ({"batch": 64, "vocab": 152064, "context": 4096}, {"batch": 4, "vocab": 4096, "context": 256}),
       "decode-64x4096", "2*batch*vocab*dtype_bytes + 8*batch*context", "batch*context", cfg={"repetition_penalty": 1.05}, dtype="float32"),
    # embeddings
    _f("embedding-scaled", "gemma2-9b", "embedding_scaled", _EMB, "Token embedding rows times sqrt(3584), the normaliser in bfloat16 as the model rounds it",
       {"input_ids": _in("batch seq", "int", high="vocab"), "table": _in("vocab hidden", "normal", scale=0.03)},
       ({"batch": 1, "seq": 2048, "vocab": 256000, "hidden": 3584}, {"batch": 2, "seq": 64, "vocab": 1024, "hidden": 256}),
       "prefill-2048", "2*batch*seq*hidden*dtype_bytes + 8*batch*seq", "batch*seq*hidden"),
    _f("embedding-sum", "bert-base", "embedding_word_position_type_sum", _EMB, "Word, position and token-type embeddings summed (before the embeddings' LayerNorm)",
       {"input_ids": _in("batch seq", "int", high="vocab"), "token_type_ids": _in("batch seq", "int", high="2"), "word": _in("vocab hidden", "normal", scale=0.1),
        "position": _in("max_positions hidden", "normal", scale=0.1), "token_type": _in("2 hidden", "normal", scale=0.1)},
       ({"batch": 32, "seq": 512, "vocab": 30522, "hidden": 768, "max_positions": 512}, {"batch": 2, "seq": 64, "vocab": 1024, "hidden": 192, "max_positions": 128}),
       "32x512", "(2*batch*seq*hidden + seq*hidden + 2*hidden)*dtype_bytes + 16*batch*seq", "2*batch*seq*hidden"),
    _f("embedding-class-position", "vit-b16", "embedding_class_token_position", _EMB, "The class token put before the 196 patch embeddings and the position embedding added",
       {"patches": _in("batch patches hidden", "act"), "cls_token": _in("1 1 hidden", "normal", scale=0.5), "position": _in("1 tokens hidden", "normal", scale=0.5)},
       ({"batch": 64, "patches": 196, "tokens": 197, "hidden": 768}, {"batch": 2, "patches": 16, "tokens": 17, "hidden": 192}),
       "batch64", "(batch*patches*hidden + hidden + tokens*hidden + batch*tokens*hidden)*dtype_bytes", "batch*tokens*hidden"),
    # data movement
    _f("paged-kv-gather", "llama3-8b", "paged_kv_gather", _MOVE, "A paged KV cache (blocks of 16 tokens, 8 KV heads of 128) read out into 16 sequences' contiguous keys and values by their block tables",
       {"key_cache": _in("blocks block_size kv_heads head_dim", "normal"), "value_cache": _in("blocks block_size kv_heads head_dim", "normal"),
        "block_table": _in("batch blocks_per_seq", "perm", of="blocks", dtype="int32")},
       ({"blocks": 5120, "block_size": 16, "kv_heads": 8, "head_dim": 128, "batch": 16, "blocks_per_seq": 256},
        {"blocks": 16, "block_size": 16, "kv_heads": 1, "head_dim": 128, "batch": 2, "blocks_per_seq": 4}),
       "decode-16x4096", "4*batch*blocks_per_seq*block_size*kv_heads*head_dim*dtype_bytes + 4*batch*blocks_per_seq", "0",
       outputs=["keys", "values"]),
    _f("window-reverse-shift-residual", "swin-tiny", "window_reverse_shift_residual", _MOVE, "The 7x7 attention windows put back into the 56x56 image, the shift of 3 undone, the shortcut added",
       {"shortcut": _in("batch size*size dim", "act"), "attn_windows": _in("batch*windows 49 dim", "act")},
       ({"batch": 64, "size": 56, "windows": 64, "dim": 96}, {"batch": 2, "size": 14, "windows": 4, "dim": 32}),
       "batch64-stage1", "3*batch*size*size*dim*dtype_bytes", "batch*size*size*dim", cfg={"window_size": 7, "shift_size": 3}),
    _f("layer-scale-residual", "convnext-tiny", "layer_scale_residual", _MOVE, "The block's end: the channels-last branch scaled by gamma, brought to channels first and added to the input (stage 1, 96 channels at 56x56)",
       {"x": _in("batch dim size size", "act"), "branch": _in("batch size size dim", "act"), "gamma": _in("dim", "normal", scale=0.3)},
       ({"batch": 64, "dim": 96, "size": 56}, {"batch": 2, "dim": 32, "size": 14}),
       "batch64-stage1", "(3*batch*dim*size*size + dim)*dtype_bytes", "2*batch*dim*size*size"),
    # quantization
    _f("fp8-quantize-group", "deepseek-v3", "quantize_fp8_per_token_group", _QUANT, "Dynamic fp8 (e4m3) quantization of activations per token and group of 128 channels: scale amax / 448",
       {"x": _in("tokens hidden", "act", scale=8.0)}, ({"tokens": 4096, "hidden": 7168}, {"tokens": 64, "hidden": 512}),
       "prefill-4096", "tokens*hidden*(dtype_bytes + 1) + 4*tokens*hidden/128", "3*tokens*hidden",
       cfg={"group_size": 128, "fp8_max": 448.0}, outputs=["q", "scales"], tolerance=FP8_TIES),
    _f("dequantize", "qwen2_5-7b-instruct-awq", "dequantize_awq_int4", _QUANT, "The down projection's AWQ weight (18944 x 3584) unpacked from int32 words and dequantized per group of 128 rows to float16",
       {"qweight": _in("in_features packs", "packed", dtype="int32"), "qzeros": _in("groups packs", "packed", dtype="int32"), "scales": _in("groups out_features", "uniform", range=[0.002, 0.02])},
       ({"in_features": 18944, "out_features": 3584, "packs": 448, "groups": 148}, {"in_features": 256, "out_features": 128, "packs": 16, "groups": 2}),
       "down-proj", "4*in_features*packs + 4*groups*packs + groups*out_features*dtype_bytes + in_features*out_features*dtype_bytes",
       "2*in_features*out_features", cfg={"group_size": 128}, dtype="float16"),
    # recurrences
    _f("selective-scan", "mamba-2_8b", "selective_scan", _REC, "The selective scan over 2048 steps: softplus(delta + bias) discretisation, a 16-wide state per channel, C readout, D skip, silu(z) gate",
       {"u": _in("batch channels seq", "act"), "delta": _in("batch channels seq", "normal", scale=0.5), "A_log": _in("channels state", "uniform", range=[0.0, 2.77], **F32),
        "B": _in("batch state seq", "normal"), "C": _in("batch state seq", "normal"), "D": _in("channels", "normal", scale=0.3, shift=1.0, **F32),
        "z": _in("batch channels seq", "act"), "dt_bias": _in("channels", "uniform", range=[-6.9, -2.3], **F32)},
       ({"batch": 1, "channels": 5120, "seq": 2048, "state": 16}, {"batch": 1, "channels": 64, "seq": 64, "state": 16}),
       "prefill-2048", "(4*batch*channels*seq + 2*batch*state*seq)*dtype_bytes + 4*(channels*state + 2*channels)", "batch*channels*seq*(6*state + 12)"),
    _f("wkv", "rwkv4-7b", "wkv_recurrence", _REC, "The WKV time mixing over a 1024-token context: decaying weighted averages of past values with a bonus for the current token, kept stable by a running maximum",
       {"time_decay": _in("channels", "uniform", range=[-5.0, 1.0], **F32), "time_first": _in("channels", "normal", scale=0.5, shift=-0.5, **F32),
        "key": _in("batch seq channels", "act"), "value": _in("batch seq channels", "act")},
       ({"batch": 8, "seq": 1024, "channels": 4096}, {"batch": 2, "seq": 64, "channels": 64}),
       "8x1024", "3*batch*seq*channels*dtype_bytes + 8*channels", "14*batch*seq*channels"),
]  # fmt: skip
