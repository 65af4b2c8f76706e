"""fastest (GPU MODE style): per problem and device kind, contestants placed by their best
ranked, passing speed-up (equal speed-ups: the earlier first; equal times too: a shared
place). The contest total is either the points of those places summed over problems and
device kinds, or the geometric mean of the best speed-ups."""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import chain, compress, repeat
from typing import cast

import numpy as np

from gpuarena.contests import columnar
from gpuarena.contests.eligibility import Bests, Board, best_counted
from gpuarena.contests.model import Contest, Entry, FastestRule, Standings
from gpuarena.contests.ranking import Candidate, rank
from gpuarena.contests.table import EntryTable

SCREEN_BY_DEFAULT = True
"""Ranks on speed-ups, so resubmissions that do not clear a contestant's best are left out."""
POINTS_TIE_RULES = ["more first places", "more problems solved"]
GEOMEAN_TIE_RULES = ["more problems solved"]


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    rule = contest.rule
    if not isinstance(rule, FastestRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not fastest")
    if isinstance(entries, EntryTable):
        return _from_table(contest, rule, entries)
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
    top = sorted(
        (entries[c][key] for c in compress(board.contestants, map(cut.__le__, scores))),
        key=lambda e: (-cast(float, e.score), e.submitted_at, e.contestant),  # bests passed: score is a float
    )
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
    candidates = [
        Candidate(
            contestant=c,
            total=math.fsum(b.values()),
            keys=(firsts[c], len(b)),
            breakdown=b,
            figures={"first places": firsts[c], "solved": len(b)},
        )
        for c, b in breakdown.items()
    ]
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
        candidates.append(Candidate(contestant=c, total=total, keys=(len(b),), breakdown=b, figures={"solved": len(b)}))
    return rank(contest, candidates, GEOMEAN_TIE_RULES)


def _table_points(c: columnar.Counted, t: EntryTable, table: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """places() over every board: the points and whether first, per Counted.best. Each
    board's wanted-th best speed-up is found by a partition; only the rows reaching it are
    placed in Python."""
    score, board, wanted = t.score[c.best], c.best_board, len(table)
    points, first = np.zeros(len(score)), np.zeros(len(score), dtype=bool)
    order = np.argsort(board, kind="stable")
    starts, sizes = columnar.runs(board[order])
    top = []
    for lo, size in zip(starts.tolist(), sizes.tolist()):
        on_board = order[lo : lo + size]
        scores = score[on_board]
        cut = np.partition(scores, size - min(wanted, size))[size - min(wanted, size)]
        top.append(on_board[scores >= cut])
    names, places = t.names["contestant"], np.concatenate(top) if top else order
    placed: dict[int, list[tuple[float, int, str, int]]] = {}
    for i, b, s, at, code in zip(
        places.tolist(),
        board[places].tolist(),
        score[places].tolist(),
        t.submitted_at[c.best[places]].tolist(),
        t.contestant[c.best[places]].tolist(),
    ):
        placed.setdefault(b, []).append((-s, at, names[code], i))
    for group in placed.values():
        group.sort()
        place = 0
        for j, (s, at, _, i) in enumerate(group):
            if not (j and s == group[j - 1][0] and at == group[j - 1][1]):
                place = j + 1
            if place > wanted:
                break
            points[i], first[i] = table[place - 1], place == 1
    return points, first


def _from_table(contest: Contest, rule: FastestRule, t: EntryTable) -> Standings:
    """The same standings from columns (table.py): bests by columnar.counted, places by
    _table_points, and per contestant only the building of its row in Python."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT)
    b = columnar.bests_by_contestant(c, t)
    names, keys = t.names["contestant"], b.keys
    candidates = []
    if rule.aggregation == "points":
        points, first = _table_points(c, t, [float(p) for p in rule.points])
        values = points.tolist()
        firsts = np.bincount(t.contestant[c.best[first]], minlength=len(names)).tolist()
        for code, lo, hi in columnar.each(c.scoped.contestants, b.span):
            won = firsts[code]
            candidates.append(
                Candidate(
                    contestant=names[code],
                    total=math.fsum(values[lo:hi]),
                    keys=(won, hi - lo),
                    breakdown=dict(zip(keys[lo:hi], values[lo:hi])),
                    figures={"first places": won, "solved": hi - lo},
                )
            )
        return rank(contest, candidates, POINTS_TIE_RULES)
    count, floor = len(contest.problems) * len(contest.device_kinds), rule.floor
    log_floor = math.log(floor)
    for code, lo, hi in columnar.each(c.scoped.contestants, b.span):
        floored = list(map(max, b.scores[lo:hi], repeat(floor)))
        total = math.exp(math.fsum(chain(map(math.log, floored), repeat(log_floor, count - (hi - lo)))) / count)
        candidates.append(
            Candidate(
                contestant=names[code],
                total=total,
                keys=(hi - lo,),
                breakdown=dict(zip(keys[lo:hi], floored)),
                figures={"solved": hi - lo},
            )
        )
    return rank(contest, candidates, GEOMEAN_TIE_RULES)
