"""ccf-kernel: operators contributed to an upstream project. Each accepted problem (passed in
ranked mode on a contest device kind, and accepted by the organizer) scores its level's base
points, plus merged_points when merged upstream; one submission counts per problem (the
highest-scoring, the earliest among equals) and the total adds them up. Bonus items never
add points; ties go to more bonus items, then more accepted problems, then the earlier
time of the last submission that counted."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from gpuarena.contests import columnar
from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import PASSED, CcfKernelRule, Contest, Entry, Standings
from gpuarena.contests.ranking import WORST, Candidate, rank
from gpuarena.contests.table import BONUS_COUNT, EntryTable, as_datetime

SCREEN_BY_DEFAULT = False
"""Points come from the organizer's review, not the speed-up: a resubmission that is merged
upstream must still count however fast it is."""
TIE_RULES = ["more bonus items", "more accepted problems", "earlier last counted submission"]


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfKernelRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-kernel")
    if isinstance(entries, EntryTable):
        return _from_table(contest, rule, entries)
    level_points, merged_points = rule.level_points, rule.merged_points

    def points(e: Entry) -> float:
        return level_points[e.level] + (merged_points if e.merged_upstream else 0.0)

    best: dict[str, dict[str, Entry]] = {}  # contestant -> problem -> the accepted entry that counts
    bonus: dict[str, set[tuple[str, str]]] = {}
    for e in counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT):
        mine = best.get(e.contestant)
        if mine is None:
            mine = best[e.contestant] = {}
        if e.accepted_by_organizer is not True or e.status != PASSED:
            continue
        current = mine.get(e.problem)
        if current is None or (points(e), current.submitted_at) > (points(current), e.submitted_at):
            mine[e.problem] = e
        if e.bonus:
            items = bonus.get(e.contestant)
            if items is None:
                items = bonus[e.contestant] = set()
            for item in e.bonus:
                items.add((e.problem, item))
    candidates = []
    for c, mine in best.items():
        breakdown = {problem: points(e) for problem, e in mine.items()}
        last = max((e.submitted_at for e in mine.values()), default=None)
        won = len(bonus.get(c, ()))
        figures: dict[str, int | float | str] = {"bonus items": won, "accepted problems": len(mine)}
        if last is not None:
            figures["last counted submission"] = last.isoformat()
        candidates.append(
            Candidate(
                contestant=c,
                total=math.fsum(breakdown.values()),
                keys=(won, len(mine), -last.timestamp() if last is not None else WORST),
                breakdown=breakdown,
                figures=figures,
            )
        )
    return rank(contest, candidates, TIE_RULES)


def _from_table(contest: Contest, rule: CcfKernelRule, t: EntryTable) -> Standings:
    """The same standings from columns (table.py): the entry that counts per (contestant,
    problem) by one lexsort (more points, then earlier), bonus pairs as OR-ed bit masks."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT)
    rows = c.rows[(t.accepted[c.rows] == 1) & t.status_passed[c.rows]]
    level_points = np.zeros(max(rule.level_points) + 1)
    for level, p in rule.level_points.items():
        level_points[level] = p
    points = level_points[t.level[rows]] + np.where(t.merged_upstream[rows], rule.merged_points, 0.0)
    order = np.lexsort((t.submitted_at[rows], -points, t.problem[rows], t.contestant[rows]))
    owner, problem = t.contestant[rows][order], t.problem[rows][order]
    starts, _ = columnar.runs(owner.astype(np.int64) * len(t.names["problem"]) + problem)
    items = np.bitwise_or.reduceat(t.bonus[rows][order], starts) if len(starts) else np.zeros(0, dtype=np.uint8)
    bonus = np.bincount(owner[starts], weights=BONUS_COUNT[items], minlength=len(t.names["contestant"]))
    span = columnar.spans(owner[starts])
    names, problems = t.names["contestant"], np.array(t.names["problem"], dtype=object)
    chosen_problems = problems[problem[starts]].tolist() if len(starts) else []
    chosen_points, chosen_at = points[order][starts].tolist(), t.submitted_at[rows][order][starts].tolist()
    candidates = []
    for code, lo, hi in columnar.each(c.scoped.contestants, span):
        breakdown = dict(zip(chosen_problems[lo:hi], chosen_points[lo:hi]))
        won = int(bonus[code])
        figures: dict[str, int | float | str] = {"bonus items": won, "accepted problems": hi - lo}
        last = as_datetime(max(chosen_at[lo:hi])) if hi > lo else None
        if last is not None:
            figures["last counted submission"] = last.isoformat()
        candidates.append(
            Candidate(
                contestant=names[code],
                total=math.fsum(breakdown.values()),
                keys=(won, hi - lo, -last.timestamp() if last is not None else WORST),
                breakdown=breakdown,
                figures=figures,
            )
        )
    return rank(contest, candidates, TIE_RULES)
