import torch

ROPE_THETA = 500000.0  # Llama-3
MAX_POSITION = 8192    # Llama-3 context length


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [tokens, heads, head_dim] float32; cos/sin: [tokens, head_dim // 2] float32
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)


def reference(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
              sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotate-half (neox-style) rotary embedding of q and k, in float32.

    q: [tokens, q_heads, head_dim], k: [tokens, kv_heads, head_dim],
    cos, sin: [tokens, head_dim // 2]. Dimension i of the first half is paired with
    dimension i + head_dim // 2 and rotated by the angle whose cos/sin are cos[:, i]/sin[:, i].
    """
    c, s = cos.float(), sin.float()
    q_out = _rotate(q.float(), c, s).to(q.dtype)
    k_out = _rotate(k.float(), c, s).to(k.dtype)
    return q_out, k_out


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, q_heads, kv_heads, head_dim = (
        axes["tokens"], axes["q_heads"], axes["kv_heads"], axes["head_dim"])
    out = {}
    for name, heads in (("q", q_heads), ("k", kv_heads)):
        t = torch.randn(tokens, heads, head_dim, generator=generator, device=device,
                        dtype=torch.float32)
        scale = 0.8 + 0.4 * torch.rand((), generator=generator, device=device)
        offset = torch.rand((), generator=generator, device=device) - 0.5
        out[name] = (t * scale + offset).to(dtype)
    # real rotary tables at random positions (a batch of sequences at different offsets)
    positions = torch.randint(0, MAX_POSITION, (tokens,), generator=generator, device=device)
    inv_freq = ROPE_THETA ** (-torch.arange(0, head_dim, 2, device=device,
                                            dtype=torch.float32) / head_dim)
    angles = positions.float()[:, None] * inv_freq[None, :]
    out["cos"] = torch.cos(angles).to(dtype)
    out["sin"] = torch.sin(angles).to(dtype)
    return out
