"""fast_p (KernelBench style): the share of the contest's problems a contestant solved
correctly with a speed-up above p, for each p of the rule. With several device kinds each
problem on each device kind is one task of the share. Ranked by the first p, ties by the next."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable

import numpy as np

from gpuarena.contests import columnar
from gpuarena.contests.eligibility import best_counted
from gpuarena.contests.model import Contest, Entry, FastPRule, Standings
from gpuarena.contests.ranking import Candidate, rank
from gpuarena.contests.table import EntryTable

SCREEN_BY_DEFAULT = True
"""Ranks on speed-ups, so resubmissions that do not clear a contestant's best are left out."""


def label(p: float) -> str:
    return f"fast_{p:g}"


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    rule = contest.rule
    if not isinstance(rule, FastPRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not fast_p")
    tasks = len(contest.problems) * len(contest.device_kinds)
    labels = [label(p) for p in rule.p]
    candidates = []
    if isinstance(entries, EntryTable):
        candidates = _table_candidates(contest, rule, entries, tasks, labels)
        return rank(contest, candidates, [f"higher {name}" for name in labels[1:]])
    for c, b in best_counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT).scores.items():
        scores = sorted(b.values())
        shares = [(len(scores) - bisect_right(scores, p)) / tasks for p in rule.p]  # strictly above p
        candidates.append(
            Candidate(
                contestant=c, total=shares[0], keys=tuple(shares[1:]), breakdown=b, figures=dict(zip(labels, shares))
            )
        )
    return rank(contest, candidates, [f"higher {name}" for name in labels[1:]])


def _table_candidates(
    contest: Contest, rule: FastPRule, t: EntryTable, tasks: int, labels: list[str]
) -> list[Candidate]:
    """The same candidates from columns (table.py): the count of bests above each p by bincount."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT)
    b = columnar.bests_by_contestant(c, t)
    names, score, owner = t.names["contestant"], t.score[c.best], t.contestant[c.best]
    above = [np.bincount(owner[score > p], minlength=len(names)).tolist() for p in rule.p]
    candidates = []
    for code, lo, hi in columnar.each(c.scoped.contestants, b.span):
        shares = [counts[code] / tasks for counts in above]
        candidates.append(
            Candidate(
                contestant=names[code],
                total=shares[0],
                keys=tuple(shares[1:]),
                breakdown=dict(zip(b.keys[lo:hi], b.scores[lo:hi])),
                figures=dict(zip(labels, shares)),
            )
        )
    return candidates
