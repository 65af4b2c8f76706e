"""Honest: one GQA decode step (level4/attention_decode) with
scaled_dot_product_attention, the KV heads expanded to the query heads."""

import torch
import torch.nn.functional as F

FAMILY = "honest"
EXPECT = ["PASSED"]
PROBLEM = "level4/attention_decode"
WORKLOADS = ["small-b2-s256"]


def solve(q, k_cache, v_cache):
    batch, q_heads, head_dim = q.shape
    group = q_heads // k_cache.shape[1]
    k = k_cache.float().repeat_interleave(group, dim=1)
    v = v_cache.float().repeat_interleave(group, dim=1)
    out = F.scaled_dot_product_attention(q.float().unsqueeze(2), k, v)
    return out.squeeze(2).to(q.dtype)
