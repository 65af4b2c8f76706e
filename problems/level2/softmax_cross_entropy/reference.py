import torch


def reference(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """loss[i] = logsumexp(logits[i, :]) - logits[i, targets[i]], in float32, cast to logits.dtype."""
    lf = logits.float()
    lse = torch.logsumexp(lf, dim=-1)
    picked = lf.gather(-1, targets.long()[:, None]).squeeze(-1)
    return (lse - picked).to(logits.dtype)


def make_inputs(axes: dict[str, int], dtype: torch.dtype, device: torch.device,
                generator: torch.Generator) -> dict[str, torch.Tensor]:
    rows, vocab = axes["rows"], axes["vocab"]
    logits = torch.randn(rows, vocab, generator=generator, device=device, dtype=torch.float32)
    scale = 1.0 + 2.0 * torch.rand((), generator=generator, device=device)
    offset = 10.0 * torch.rand((), generator=generator, device=device) - 5.0
    targets = torch.randint(0, vocab, (rows,), generator=generator, device=device,
                            dtype=torch.int64)
    # like a trained model, rows predict their targets with varying confidence: raise each
    # target's logit by a random 0..8 standard deviations (losses range from ~0 to ~log(vocab))
    boost = 8.0 * torch.rand(rows, generator=generator, device=device) * scale
    logits = logits * scale + offset
    logits[torch.arange(rows, device=device), targets] += boost
    return {"logits": logits.to(dtype), "targets": targets}
