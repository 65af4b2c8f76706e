"""How many distinct computations a set of problems holds (issue 48, `gpuarena dataset distinct`).

Problems with one exact key (`identity.py`) are duplicates: one computation on the same shapes
under other names. Problems with one family key are one computation on other shapes: a family is
one distinct computation. Within a level, the families are also counted by **op family**, a
coarse kind read from the problem's operator (`kind`): every normalisation is one, every
attention one, `aten.mul` and `jax.lax.mul` one; the issue asks that no level be dominated by
one op family (at most a third of its distinct computations).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset.identity import identity
from gpuarena.dataset.keys import Identity
from gpuarena.problems.loader import Problem, discover

DOMINANT_SHARE = 1 / 3
"""A level whose largest op family holds more of its distinct computations than this is dominated."""

MODEL_PREFIX = re.compile(
    r"^(llama|mistral|mixtral|qwen\d*(moe)?|phi\d*|gemma\d*|bert|vit|convnext|resnet|gpt2|starcoder\d*|newgelu"
    r"|efficientnet|segformer|mobilenetv\d|swin|m?t5|regnety?|wav2vec2|whisper|beit|clip(vision)?|olmo|dinov2"
    r"|debertav?\d?|bloom|falcon|gptneox|opt|mpt|albert|bart|deepseekv\d|gptoss)",
    re.IGNORECASE,
)
"""The architectures' names that lead their module classes (WhisperEncoderLayer: EncoderLayer)."""
NAMESPACES = ("aten.", "jax.lax.", "jax.nn.", "torch.nn.functional.", "torch.")
"""Where a level-1 operator's name comes from: aten.mul.Tensor, jax.lax.mul, torch.softmax, and
jax.nn.dot_product_attention (cuDNN's attention in a JAX harvest, written portably)."""
KEYWORDS = (
    ("norm", "norm"),
    ("attention", "attention"),
    ("softmax", "attention"),
    ("bnts", "attention"),
    ("bkgts", "attention"),
    ("btkgh", "attention"),
    ("rotary", "rotary"),
    ("bi,j", "rotary"),
    ("bi_j", "rotary"),
    ("embedding", "embedding"),
    ("mlp", "mlp"),
    ("feedforward", "mlp"),
    ("ffw", "mlp"),
    ("intermediate", "mlp"),
    ("ffn", "mlp"),
    ("experts", "experts"),
    ("sparsemoe", "experts"),
    ("moeblock", "experts"),
    ("conv", "convolution"),
    ("shortcut", "convolution"),
    ("bottleneck", "convolution"),
    ("gelu", "activation"),
    ("silu", "activation"),
    ("relu", "activation"),
    ("pool", "pooling"),
)
"""A fusion's kind from words in its operator's name, first match wins."""


def kind(operator: str, level: int) -> str:
    """The op family: a level-1 problem's operator without its namespace and overload
    (aten.mul.Tensor and jax.lax.mul: mul); a fusion's module class or JAX scope without the
    model's name, by the KEYWORDS it holds (LlamaRMSNorm+residual, final_normalization: norm)."""
    if level == 1:
        name = operator.split("(", 1)[0]
        for namespace in NAMESPACES:
            name = name.removeprefix(namespace)
        return name.split(".")[0].lstrip("_")
    name = operator.split(":", 1)[-1]
    name = name.rsplit("/", 1)[-1] if operator.startswith("scope:") else name
    lowered = MODEL_PREFIX.sub("", name).lower()
    for word, family in KEYWORDS:
        if word in lowered:
            return family
    return re.sub(r"_\d+$", "", lowered) or name.lower()


class Group(BaseModel):
    """Problems that share a key."""

    model_config = ConfigDict(extra="forbid")

    key: str
    problems: list[str]


class Level(BaseModel):
    """One level's counts."""

    model_config = ConfigDict(extra="forbid")

    level: int
    problems: int
    exact: int
    """Distinct computations on distinct shapes."""
    distinct: int
    """Distinct computations (families)."""
    largest_kind: str
    largest_kind_distinct: int
    largest_share: float
    """The largest op family's share of the level's distinct computations."""
    largest_weight_share: float
    """The largest op family's share of the level's weight (problem weights)."""
    dominated: bool


class DistinctReport(BaseModel):
    """What `gpuarena dataset distinct` measures."""

    model_config = ConfigDict(extra="forbid")

    problems: int
    exact: int
    distinct: int
    duplicate_groups: list[Group]
    """Exact duplicates: the same computation on the same shapes, more than one problem."""
    families: list[Group]
    """Families of more than one problem whose members are not all exact duplicates of one another."""
    levels: list[Level]
    untraced: list[str]
    """Problems whose reference ran on no workload: each counted as its own computation."""


def identities(problems: list[Problem], progress: Any = lambda _text: None) -> list[Identity]:
    """Each problem's keys."""
    found = []
    for problem in problems:
        progress(problem.id)
        found.append(identity(problem))
    return found


def _groups(ids: list[Identity], attribute: str) -> dict[str, list[Identity]]:
    grouped: dict[str, list[Identity]] = defaultdict(list)
    for one in ids:
        grouped[getattr(one, attribute)].append(one)
    return grouped


def report(problems: list[Problem], ids: list[Identity]) -> DistinctReport:
    """The counts over the problems (with their identities, in the same order)."""
    by_id = {p.id: p for p in problems}
    exact, families = _groups(ids, "exact"), _groups(ids, "family")
    levels = []
    for level in sorted({i.level for i in ids}):
        mine = [i for i in ids if i.level == level]
        family_kinds: dict[str, str] = {}
        weights: dict[str, float] = defaultdict(float)
        for one in mine:
            spec = by_id[one.problem].spec
            family_kinds.setdefault(one.family, kind(spec.provenance.operator or spec.name, level))
            weights[family_kinds[one.family]] += spec.weight
        counts = Counter(family_kinds.values())
        top, top_count = max(counts.items(), key=lambda item: (item[1], weights[item[0]]))
        share = top_count / len(family_kinds)
        levels.append(
            Level(
                level=level,
                problems=len(mine),
                exact=len({i.exact for i in mine}),
                distinct=len(family_kinds),
                largest_kind=top,
                largest_kind_distinct=top_count,
                largest_share=round(share, 4),
                largest_weight_share=round(weights[top] / sum(weights.values()), 4),
                dominated=share > DOMINANT_SHARE,
            )
        )

    def listed(grouped: dict[str, list[Identity]], keep: Any) -> list[Group]:
        chosen = [Group(key=k, problems=sorted(i.problem for i in v)) for k, v in grouped.items() if keep(v)]
        return sorted(chosen, key=lambda g: (-len(g.problems), g.problems[0]))

    return DistinctReport(
        problems=len(ids),
        exact=len(exact),
        distinct=len(families),
        duplicate_groups=listed(exact, lambda v: len(v) > 1),
        families=listed(families, lambda v: len({i.exact for i in v}) > 1),
        levels=levels,
        untraced=sorted(i.problem for i in ids if i.error),
    )


def distinct(root: Path, progress: Any = lambda _text: None) -> DistinctReport:
    """The report for every problem under `root`."""
    problems = discover(root)
    return report(problems, identities(problems, progress))
