import math

import torch

ROPE_THETA = 500000.0  # Llama-3
MAX_POSITION = 8192    # Llama-3 context length
GQA_GROUP = 4          # query heads per kv head (Llama-3-8B: 32 / 8), a constant of the problem


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [tokens, heads, head_dim] float32; cos/sin: [tokens, head_dim // 2] float32
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def reference(x: torch.Tensor, w_qkv: torch.Tensor, cos: torch.Tensor,
              sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv = x @ w_qkv, split into q, k, v heads; rotate-half rotary embedding on q and k.

    x: [tokens, hidden]; w_qkv: [hidden, (q_heads + 2 * kv_heads) * head_dim] with the q
    columns first, then k, then v; cos, sin: [tokens, head_dim // 2].
    Returns q: [tokens, q_heads, head_dim], k and v: [tokens, kv_heads, head_dim].
    The head counts follow from the shapes: head_dim = 2 * cos.shape[-1], and
    q_heads = GQA_GROUP * kv_heads (4 query heads per kv head, as in Llama-3-8B).
    """
    tokens = x.shape[0]
    head_dim = 2 * cos.shape[-1]
    total_heads = w_qkv.shape[1] // head_dim          # q_heads + 2 * kv_heads
    kv_heads = total_heads // (GQA_GROUP + 2)
    q_heads = total_heads - 2 * kv_heads
    qkv = (x.float() @ w_qkv.float()).view(tokens, total_heads, head_dim)
    q, k, v = qkv.split([q_heads, kv_heads, kv_heads], dim=1)
    c, s = cos.float(), sin.float()
    return (_rotate(q, c, s).to(x.dtype), _rotate(k, c, s).to(x.dtype),
            v.contiguous().to(x.dtype))


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden = axes["tokens"], axes["hidden"]
    q_heads, kv_heads, head_dim = axes["q_heads"], axes["kv_heads"], axes["head_dim"]
    assert q_heads == GQA_GROUP * kv_heads, "the problem fixes q_heads = GQA_GROUP * kv_heads"
    n = (q_heads + 2 * kv_heads) * head_dim
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    x = x * (0.8 + 0.4 * torch.rand((), generator=generator, device=device)) + (
        0.4 * torch.rand((), generator=generator, device=device) - 0.2)
    w_scale = (0.8 + 0.4 * torch.rand((), generator=generator, device=device)) / math.sqrt(hidden)
    w_qkv = torch.randn(hidden, n, generator=generator, device=device) * w_scale
    positions = torch.randint(0, MAX_POSITION, (tokens,), generator=generator, device=device)
    inv_freq = ROPE_THETA ** (-torch.arange(0, head_dim, 2, device=device,
                                            dtype=torch.float32) / head_dim)
    angles = positions.float()[:, None] * inv_freq[None, :]
    return {"x": x.to(dtype), "w_qkv": w_qkv.to(dtype),
            "cos": torch.cos(angles).to(dtype), "sin": torch.sin(angles).to(dtype)}
