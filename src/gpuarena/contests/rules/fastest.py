"""fastest (GPU MODE style): per problem and device kind, contestants placed by their best
ranked, passing speed-up (equal speed-ups: the earlier first; equal times too: a shared
place). The contest total is either the points of those places summed over problems and
device kinds, or the geometric mean of the best speed-ups."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import chain, compress, repeat

from gpuarena.contests.eligibility import Bests, Board, best_counted
from gpuarena.contests.model import Contest, Entry, FastestRule, Standings
from gpuarena.contests.ranking import Candidate, rank

SCREEN_BY_DEFAULT = True
"""Ranks on speed-ups, so resubmissions that do not clear a contestant's best are left out."""
POINTS_TIE_RULES = ["more first places", "more problems solved"]
GEOMEAN_TIE_RULES = ["more problems solved"]


def standings(contest: Contest, entries: Iterable[Entry]) -> Standings:
    rule = contest.rule
    if not isinstance(rule, FastestRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not fastest")
    bests = best_counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT)
    if rule.aggregation == "points":
        return _points(contest, rule, bests)
    return _geomean(contest, rule, bests)


def places(board: Board, entries: dict[str, dict[str, Entry]], key: str, wanted: int) -> list[tuple[Entry, int]]:
    """(entry, place) best first on one board, down to place `wanted`: higher speed-up, then
    earlier; equal speed-up and time share a place (1, 1, 3). A board may hold every
    contestant and points go to a few places: the wanted-th best speed-up is found among the
    packed speed-ups, and only the entries reaching it are read and sorted."""
    if not board.contestants or wanted < 1:
        return []
    scores = board.scores
    cut = sorted(scores, reverse=True)[min(wanted, len(scores)) - 1]
    top = sorted((entries[c][key] for c in compress(board.contestants, map(cut.__le__, scores))),
                 key=lambda e: (-e.score, e.submitted_at, e.contestant))
    found: list[tuple[Entry, int]] = []
    for i, e in enumerate(top):
        above = top[i - 1] if i else None
        shared = above is not None and e.score == above.score and e.submitted_at == above.submitted_at
        place = found[-1][1] if shared else i + 1
        if place > wanted:
            break
        found.append((e, place))
    return found


def _points(contest: Contest, rule: FastestRule, bests: Bests) -> Standings:
    table = [float(p) for p in rule.points]
    # Every solved problem is in the breakdown, with 0 unless placed below.
    breakdown = {c: dict.fromkeys(mine, 0.0) for c, mine in bests.scores.items()}
    firsts = dict.fromkeys(breakdown, 0)
    for key, board in bests.boards.items():
        for e, place in places(board, bests.entries, key, len(table)):
            breakdown[e.contestant][key] = table[place - 1]
            if place == 1:
                firsts[e.contestant] += 1
    candidates = [Candidate(contestant=c, total=math.fsum(b.values()), keys=(firsts[c], len(b)), breakdown=b,
                            figures={"first places": firsts[c], "solved": len(b)})
                  for c, b in breakdown.items()]
    return rank(contest, candidates, POINTS_TIE_RULES)


def _geomean(contest: Contest, rule: FastestRule, bests: Bests) -> Standings:
    """Over every problem and device kind of the contest; an unsolved one counts as rule.floor,
    and a solved one as at least rule.floor (a slow solution never lowers the mean)."""
    count = len(contest.problems) * len(contest.device_kinds)
    floor = rule.floor
    log_floor = math.log(floor)
    candidates = []
    for c, mine in bests.scores.items():
        b = dict(zip(mine, map(max, mine.values(), repeat(floor))))
        total = math.exp(math.fsum(chain(map(math.log, b.values()), repeat(log_floor, count - len(b)))) / count)
        candidates.append(Candidate(contestant=c, total=total, keys=(len(b),), breakdown=b,
                                    figures={"solved": len(b)}))
    return rank(contest, candidates, GEOMEAN_TIE_RULES)
