import math

import torch


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> torch.Tensor:
    """One decode step of grouped-query attention, in float32, cast to q.dtype.

    q: [batch, q_heads, head_dim]; k_cache, v_cache: [batch, kv_heads, seq, head_dim].
    Query head h attends with kv head h // (q_heads // kv_heads). Scale 1/sqrt(head_dim);
    every cached position is attended (no mask). Returns out: [batch, q_heads, head_dim].
    """
    batch, q_heads, head_dim = q.shape
    kv_heads = k_cache.shape[1]
    group = q_heads // kv_heads
    qf = q.float().view(batch, kv_heads, group, head_dim)
    scores = torch.matmul(qf, k_cache.float().transpose(-1, -2)) / math.sqrt(head_dim)
    p = torch.softmax(scores, dim=-1)                       # [batch, kv_heads, group, seq]
    out = torch.matmul(p, v_cache.float())                  # [batch, kv_heads, group, head_dim]
    return out.reshape(batch, q_heads, head_dim).to(q.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    batch, q_heads, kv_heads, seq, head_dim = (
        axes["batch"], axes["q_heads"], axes["kv_heads"], axes["seq"], axes["head_dim"])

    def rnd(*shape):
        return torch.randn(*shape, generator=generator, device=device, dtype=torch.float32)

    def u():
        return torch.rand((), generator=generator, device=device)

    # scores q.k/sqrt(d) with a spread of 2..3: attention is peaked, as in trained models,
    # so the output is not just the mean of v
    q = rnd(batch, q_heads, head_dim) * (2.0 + u()) + (0.4 * u() - 0.2)
    k = rnd(batch, kv_heads, seq, head_dim) + (rnd(head_dim) * 0.3)
    v = rnd(batch, kv_heads, seq, head_dim) * (0.5 + 1.5 * u()) + (0.6 * u() - 0.3)
    return {"q": q.to(dtype), "k_cache": k.to(dtype), "v_cache": v.to(dtype)}
