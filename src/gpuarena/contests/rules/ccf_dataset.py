"""ccf-dataset: dataset contributions. Contributors ranked by the number of samples the
organizer accepted, ties by the accepted samples' total score, then by bonus items (each
item counted once per problem, from submissions with accepted samples).

A sample's score is what its check recorded (dataset/sample_score.py): its optimised kernel's
speed-up over the canonical reference (the dataset's reference for the computation, or the
reference's canonical graph with dead and repeated work left out), never over the contributor's
reference alone, so a deliberately slow reference does not win the tie-break (issue 48)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gpuarena.contests import columnar
from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import CcfDatasetRule, Contest, Entry, Standings
from gpuarena.contests.ranking import Candidate, rank
from gpuarena.contests.table import BONUS_COUNT, EntryTable

SCREEN_BY_DEFAULT = False
"""Samples are counted by the organizer's review, not by a speed-up."""
TIE_RULES = ["higher total sample score", "more bonus items"]


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfDatasetRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-dataset")
    if isinstance(entries, EntryTable):
        return _from_table(contest, entries)
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
        candidates.append(
            Candidate(
                contestant=c,
                total=total,
                keys=(score, len(bonus)),
                breakdown={p: float(n) for p, n in samples.items()},
                figures={"samples": total, "sample score": score, "bonus items": len(bonus)},
            )
        )
    return rank(contest, candidates, TIE_RULES)


def _from_table(contest: Contest, t: EntryTable) -> Standings:
    """The same standings from columns (table.py): samples and bonus masks reduced per
    (contestant, problem), the sample scores summed exactly (fsum) per contestant."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT)
    rows = c.rows[t.samples_accepted[c.rows] != 0]
    order = np.lexsort((t.problem[rows], t.contestant[rows]))
    owner, problem = t.contestant[rows][order], t.problem[rows][order]
    starts, _ = columnar.runs(owner.astype(np.int64) * len(t.names["problem"]) + problem)
    empty = not len(starts)
    samples = [] if empty else np.add.reduceat(t.samples_accepted[rows][order], starts).tolist()
    items = np.zeros(0, dtype=np.uint8) if empty else np.bitwise_or.reduceat(t.bonus[rows][order], starts)
    bonus = np.bincount(owner[starts], weights=BONUS_COUNT[items], minlength=len(t.names["contestant"]))
    problems = [] if empty else np.array(t.names["problem"], dtype=object)[problem[starts]].tolist()
    per_problem, per_row = columnar.spans(owner[starts]), columnar.spans(owner)
    scores = t.samples_score[rows][order].tolist()
    names, candidates = t.names["contestant"], []
    for code, lo, hi in columnar.each(c.scoped.contestants, per_problem):
        first, last = per_row.get(code, (0, 0))
        total, score, won = sum(samples[lo:hi]), math.fsum(scores[first:last]), int(bonus[code])
        candidates.append(
            Candidate(
                contestant=names[code],
                total=total,
                keys=(score, won),
                breakdown={p: float(n) for p, n in zip(problems[lo:hi], samples[lo:hi])},
                figures={"samples": total, "sample score": score, "bonus items": won},
            )
        )
    return rank(contest, candidates, TIE_RULES)
