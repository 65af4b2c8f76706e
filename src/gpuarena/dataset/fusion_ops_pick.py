"""The plain-PyTorch pieces of the level-2 fusions that choose (dataset/fusions.py): MoE routers
and the glue around the experts (token permutation and the weighted combine), and the LM head's
side (logit soft-capping, the per-token cross-entropy, sampling's filters, repetition penalty).

Copied by source into each reference, as fusion_ops' pieces are. Routers and sampling compute in
float32; the draws give every choice a margin (fusion_ops.draw: `ranked`, `grouped`), so the
experts a router picks are the one answer, and a sort's equal keys keep their order (stable).
"""

from __future__ import annotations

from typing import Any

import torch

Params = dict[str, Any]
Config = dict[str, Any]


def router_topk_rescale(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Mixtral's router after its gate: softmax over the experts in float32, the top_k, their
    weights rescaled to sum to one and rounded to the logits' dtype; the expert ids."""
    weights, ids = p["logits"].float().softmax(-1).topk(int(cfg["top_k"]), -1)
    return (weights / weights.sum(-1, keepdim=True)).to(p["logits"].dtype), ids


def router_sigmoid_grouped_topk(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3's router after its gate: sigmoid scores; the choice adds the selection bias;
    the best topk_group of n_group groups by their two best choices; top_k experts among them;
    their weights the scores without the bias, rescaled to sum to one, times routed_scaling_factor."""
    scores = p["logits"].float().sigmoid()
    choice = scores + p["bias"].float()
    groups = int(cfg["n_group"])
    best = choice.unflatten(-1, (groups, -1)).topk(2, -1).values.sum(-1)
    kept = torch.zeros_like(best, dtype=torch.bool).scatter(-1, best.topk(int(cfg["topk_group"]), -1).indices, True)
    choice = choice.masked_fill(~kept.repeat_interleave(choice.shape[-1] // groups, -1), float("-inf"))
    ids = choice.topk(int(cfg["top_k"]), -1).indices
    weights = scores.gather(-1, ids)
    return weights / weights.sum(-1, keepdim=True) * float(cfg["routed_scaling_factor"]), ids


def router_top1_sigmoid_scale_input(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """Llama-4's router after its gate: each token's best expert, its weight the sigmoid of that
    logit (rounded to the model's dtype), applied to the token's hidden state before the expert."""
    top, ids = p["logits"].topk(1, -1)
    weight = top.float().sigmoid().to(p["hidden"].dtype)
    return (p["hidden"].float() * weight.float()).to(p["hidden"].dtype), ids


def moe_token_permute(p: Params, cfg: Config) -> tuple[torch.Tensor, torch.Tensor]:
    """A MoE's dispatch: every (token, slot) pair's hidden state gathered in the order of its
    expert (a stable sort of the ids: by expert, then token, then slot), and where each expert's
    rows end (cumulative counts over `experts`)."""
    ids = p["expert_ids"]
    flat = ids.flatten()
    order = torch.sort(flat, stable=True).indices
    ends = torch.bincount(flat, minlength=int(p["experts"])).cumsum(0)
    return p["hidden"][order // ids.shape[-1]], ends


def moe_unpermute_weighted_sum(p: Params, cfg: Config) -> torch.Tensor:
    """A MoE's combine: the experts' outputs (rows in dispatch order; `order` says which
    (token, slot) pair each row is) put back by token and summed weighted by the router's weights,
    in float32 in slot order."""
    weights = p["weights"].float()
    rows = torch.empty_like(p["expert_out"])
    rows[p["order"]] = p["expert_out"]
    slots = rows.view(weights.shape[0], weights.shape[1], -1).float()
    return (slots * weights[..., None]).sum(1).to(p["expert_out"].dtype)


def final_logit_softcap(p: Params, cfg: Config) -> torch.Tensor:
    """Gemma-2's final logits soft-capped: cap * tanh(logits / cap)."""
    cap = float(cfg["final_logit_softcapping"])
    return (cap * torch.tanh(p["logits"].float() / cap)).to(p["logits"].dtype)


def cross_entropy_per_token(p: Params, cfg: Config) -> torch.Tensor:
    """The language-model loss of each token in float32: logsumexp of its logits minus its target's
    logit; 0 where the target is ignore_index (-100)."""
    logits, targets = p["logits"].float(), p["targets"]
    picked = logits.gather(-1, targets.clamp_min(0)[:, None])[:, 0]
    return torch.where(targets != -100, logits.logsumexp(-1) - picked, 0.0)


def sampling_temperature_topk_probs(p: Params, cfg: Config) -> torch.Tensor:
    """Sampling's distribution with a temperature and top-k: logits / temperature, all but each
    row's top_k set to -inf, softmax (float32)."""
    scaled = p["logits"].float() / float(cfg["temperature"])
    kth = scaled.topk(int(cfg["top_k"]), -1).values[..., -1:]
    return scaled.masked_fill(scaled < kth, float("-inf")).softmax(-1)


def sampling_top_p_probs(p: Params, cfg: Config) -> torch.Tensor:
    """Sampling's distribution with a temperature and nucleus (top-p) filtering: the fewest most
    likely tokens whose probability reaches top_p (those with less than top_p ranked above them,
    a stable sort deciding equal logits), renormalised; zero elsewhere."""
    scaled = p["logits"].float() / float(cfg["temperature"])
    ranked, where = torch.sort(scaled, dim=-1, descending=True, stable=True)
    probs = ranked.softmax(-1)
    kept = torch.where(probs.cumsum(-1) - probs < float(cfg["top_p"]), probs, 0.0)
    return torch.zeros_like(scaled).scatter(-1, where, kept / kept.sum(-1, keepdim=True))


def repetition_penalty(p: Params, cfg: Config) -> torch.Tensor:
    """The repetition penalty on the logits of the tokens a sequence holds already: a negative
    logit times the penalty, a positive one divided by it (each token once, however often seen)."""
    logits, seen = p["logits"].float(), p["previous_ids"]
    penalty = float(cfg["repetition_penalty"])
    old = logits.gather(-1, seen)
    return logits.scatter(-1, seen, torch.where(old < 0, old * penalty, old / penalty))
