"""ccf-dataset: dataset contributions. Contributors ranked by the number of samples the
organizer accepted, ties by the accepted samples' total score, then by bonus items (each
item counted once per problem, from submissions with accepted samples)."""

from __future__ import annotations

import math
from collections.abc import Iterable

from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import CcfDatasetRule, Contest, Entry, Standings
from gpuarena.contests.ranking import Candidate, rank

SCREEN_BY_DEFAULT = False
"""Samples are counted by the organizer's review, not by a speed-up."""
TIE_RULES = ["higher total sample score", "more bonus items"]


def standings(contest: Contest, entries: Iterable[Entry]) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfDatasetRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-dataset")
    # contestant -> (problem -> accepted samples, their scores, bonus (problem, item) pairs)
    found: dict[str, tuple[dict[str, int], list[float], set[tuple[str, str]]]] = {}
    for e in counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT):
        mine = found.get(e.contestant)
        if mine is None:
            mine = found[e.contestant] = ({}, [], set())
        count = e.samples_accepted
        if not count:
            continue
        samples = mine[0]
        samples[e.problem] = samples.get(e.problem, 0) + count
        mine[1].append(e.samples_score)
        for item in e.bonus:
            mine[2].add((e.problem, item))
    candidates = []
    for c, (samples, scores, bonus) in found.items():
        total, score = sum(samples.values()), math.fsum(scores)
        candidates.append(Candidate(contestant=c, total=total, keys=(score, len(bonus)),
                                    breakdown={p: float(n) for p, n in samples.items()},
                                    figures={"samples": total, "sample score": score, "bonus items": len(bonus)}))
    return rank(contest, candidates, TIE_RULES)
