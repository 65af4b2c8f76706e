import math

import torch


def reference(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """loss[t] = logsumexp(x[t] @ weight) - (x[t] @ weight)[targets[t]], in float32.

    x: [tokens, hidden], weight: [hidden, vocab], targets: [tokens] (int64).
    Returns loss: [tokens] in x.dtype.
    """
    logits = x.float() @ weight.float()
    lse = torch.logsumexp(logits, dim=-1)
    picked = logits.gather(-1, targets.long()[:, None]).squeeze(-1)
    return (lse - picked).to(x.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    tokens, hidden, vocab = axes["tokens"], axes["hidden"], axes["vocab"]
    x = torch.randn(tokens, hidden, generator=generator, device=device, dtype=torch.float32)
    x = x * (0.8 + 0.4 * torch.rand((), generator=generator, device=device)) + (
        0.4 * torch.rand((), generator=generator, device=device) - 0.2)
    # logits with a spread of about 1.5 to 3
    w_scale = (1.5 + 1.5 * torch.rand((), generator=generator, device=device)) / math.sqrt(hidden)
    weight = torch.randn(hidden, vocab, generator=generator, device=device) * w_scale
    targets = torch.randint(0, vocab, (tokens,), generator=generator, device=device,
                            dtype=torch.int64)
    # like a trained model, tokens predict their targets with varying confidence: raise each
    # target's logit by a random 0..20 (losses then range from ~0 to ~log(vocab))
    boost = 20.0 * torch.rand(tokens, 1, generator=generator, device=device)
    w_t = weight[:, targets].t()                                   # [tokens, hidden]
    x = x + boost * w_t / w_t.pow(2).sum(dim=-1, keepdim=True)
    return {"x": x.to(dtype), "weight": weight.to(dtype), "targets": targets}
