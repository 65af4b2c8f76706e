"""ccf-kernel: operators contributed to an upstream project. Each accepted problem (passed in
ranked mode on a contest device kind, and accepted by the organizer) scores its level's base
points, plus merged_points when merged upstream; one submission counts per problem (the
highest-scoring, the earliest among equals) and the total adds them up. Bonus items never
add points; ties go to more bonus items, then more accepted problems, then the earlier
time of the last submission that counted."""

from __future__ import annotations

import math
from collections.abc import Iterable

from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import PASSED, CcfKernelRule, Contest, Entry, Standings
from gpuarena.contests.ranking import WORST, Candidate, rank

SCREEN_BY_DEFAULT = False
"""Points come from the organizer's review, not the speed-up: a resubmission that is merged
upstream must still count however fast it is."""
TIE_RULES = ["more bonus items", "more accepted problems", "earlier last counted submission"]


def standings(contest: Contest, entries: Iterable[Entry]) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfKernelRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-kernel")
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
        items = len(bonus.get(c, ()))
        figures: dict[str, int | float | str] = {"bonus items": items, "accepted problems": len(mine)}
        if last is not None:
            figures["last counted submission"] = last.isoformat()
        candidates.append(Candidate(contestant=c, total=math.fsum(breakdown.values()),
                                    keys=(items, len(mine), -last.timestamp() if last is not None else WORST),
                                    breakdown=breakdown, figures=figures))
    return rank(contest, candidates, TIE_RULES)
