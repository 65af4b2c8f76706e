"""Ordering contestants by a total and tie rules, and naming the tie rule that decided each
place, shared by every rule."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gpuarena.contests.model import Contest, Row, Standings

WORST = float("-inf")
"""A tie key for a figure a contestant does not have (no accepted submission, no speed-up)."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """One contestant's figures before ranking."""

    contestant: str
    total: float
    keys: tuple[float, ...] = ()
    """One per tie rule, oriented so that larger is better (an earlier time: minus its timestamp)."""
    breakdown: dict[str, float] = field(default_factory=dict)
    figures: dict[str, int | float | str] = field(default_factory=dict)


def rank(contest: Contest, candidates: Iterable[Candidate], tie_rules: Sequence[str]) -> Standings:
    """Best total first, ties by each tie rule in turn; contestants equal on all of them share
    a rank (1, 1, 3) and are listed by name. Each row names the tie rule that put it below an
    equal total above it."""
    ordered = sorted(candidates, key=lambda c: (-c.total, *(-k for k in c.keys), c.contestant))
    rows: list[Row] = []
    previous: Candidate | None = None
    rank_now = 0
    for i, c in enumerate(ordered):
        if len(c.keys) != len(tie_rules):
            raise ValueError(f"{c.contestant}: {len(c.keys)} tie keys for {len(tie_rules)} tie rules")
        tie_break = None
        if previous is None or c.total != previous.total or c.keys != previous.keys:
            rank_now = i + 1
            if previous is not None and c.total == previous.total:
                decided = next(j for j, (a, b) in enumerate(zip(c.keys, previous.keys)) if a != b)
                tie_break = tie_rules[decided]
        # Built here from the rules' own figures: validating 10,000 rows would copy every
        # 50-problem breakdown once more (bench/standings.py).
        rows.append(
            Row.trusted(
                dict(
                    rank=rank_now,
                    contestant=c.contestant,
                    total=float(c.total),
                    breakdown=c.breakdown,
                    figures=c.figures,
                    tie_break=tie_break,
                )
            )
        )
        previous = c
    return Standings(contest=contest.slug, rule=contest.rule.name, tie_rules=list(tie_rules), rows=rows)
