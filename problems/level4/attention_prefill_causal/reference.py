import math

import torch


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal grouped-query attention, in float32, cast to q.dtype.

    q: [batch, q_heads, seq, head_dim]; k, v: [batch, kv_heads, seq, head_dim].
    Query head h uses kv head h // (q_heads // kv_heads); query i attends keys j <= i;
    scale 1/sqrt(head_dim). Returns out: [batch, q_heads, seq, head_dim].
    """
    batch, q_heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    scale = 1.0 / math.sqrt(head_dim)
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).triu(1)  # j > i
    out = torch.empty(batch, q_heads, seq, head_dim, dtype=torch.float32, device=q.device)
    # one (batch, kv head) at a time keeps the float32 score matrix small
    for b in range(batch):
        for g in range(kv_heads):
            qs = q[b, g * group:(g + 1) * group].float()          # [group, seq, head_dim]
            kf, vf = k[b, g].float(), v[b, g].float()              # [seq, head_dim]
            s = torch.matmul(qs, kf.t()) * scale                   # [group, seq, seq]
            s.masked_fill_(mask, float("-inf"))
            out[b, g * group:(g + 1) * group] = torch.matmul(torch.softmax(s, dim=-1), vf)
    return out.to(q.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    batch, q_heads, kv_heads, seq, head_dim = (
        axes["batch"], axes["q_heads"], axes["kv_heads"], axes["seq"], axes["head_dim"])

    def rnd(*shape):
        return torch.randn(*shape, generator=generator, device=device, dtype=torch.float32)

    def u():
        return torch.rand((), generator=generator, device=device)

    # scores with a spread of 1.5..2.5: peaked attention, as in trained models
    q = rnd(batch, q_heads, seq, head_dim) * (1.5 + u()) + (0.4 * u() - 0.2)
    k = rnd(batch, kv_heads, seq, head_dim) + rnd(head_dim) * 0.3
    v = rnd(batch, kv_heads, seq, head_dim) * (0.5 + 1.5 * u()) + (0.6 * u() - 0.3)
    return {"q": q.to(dtype), "k": k.to(dtype), "v": v.to(dtype)}
