"""ccf-migration: code migrated to another platform, scored by a judge (60 runs, 61-100 by
output match, up to +50 for the speed-up; the figure comes with each entry). Only a
contestant's best entry counts, over the whole contest; ties by the larger speed-up, then
the larger completeness (both of that best entry)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import numpy as np

from gpuarena.contests import columnar
from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import CcfMigrationRule, Contest, Entry, Standings
from gpuarena.contests.ranking import WORST, Candidate, rank
from gpuarena.contests.table import EntryTable

SCREEN_BY_DEFAULT = False
"""The judge scores each entry; a resubmission with a better output match but the same
speed-up must still count."""
TIE_RULES = ["larger speed-up", "larger completeness"]


def _merit(e: Entry) -> tuple[float, float, float, float, int]:
    """Judge score, speed-up, completeness, then the earlier submission (larger is better)."""
    assert e.judge_score is not None  # only entries with a judge score are compared
    return (
        e.judge_score,
        e.score if e.score is not None else WORST,
        e.completeness if e.completeness is not None else WORST,
        -e.submitted_at.timestamp(),
        -e.submission_id,
    )


def standings(contest: Contest, entries: Iterable[Entry] | EntryTable) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfMigrationRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-migration")
    if isinstance(entries, EntryTable):
        return _from_table(contest, entries)
    best: dict[str, Entry | None] = {}
    for e in counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT):
        current = best.get(e.contestant)
        if e.judge_score is None:
            if e.contestant not in best:
                best[e.contestant] = None
        elif (
            current is None
            or e.judge_score > cast(float, current.judge_score)  # a kept entry has a judge score
            or (e.judge_score == current.judge_score and _merit(e) > _merit(current))
        ):
            best[e.contestant] = e
    candidates = []
    for c, top in best.items():
        if top is None:
            candidates.append(Candidate(contestant=c, total=0.0, keys=(WORST, WORST)))
            continue
        judge, speed_up, completeness, _, _ = _merit(top)
        figures: dict[str, int | float | str] = {"best submission": top.submission_id}
        if top.score is not None:
            figures["speed-up"] = top.score
        if top.completeness is not None:
            figures["completeness"] = top.completeness
        candidates.append(
            Candidate(
                contestant=c,
                total=judge,
                keys=(speed_up, completeness),
                breakdown={top.problem: judge},
                figures=figures,
            )
        )
    return rank(contest, candidates, TIE_RULES)


def _from_table(contest: Contest, t: EntryTable) -> Standings:
    """The same standings from columns (table.py): each contestant's best by _merit's order,
    one lexsort over the rows with the contestant's best judge score (a missing speed-up or
    completeness sorts as WORST)."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT)
    rows = c.rows[~np.isnan(t.judge_score[c.rows])]
    top = np.full(len(t.names["contestant"]), -np.inf)
    np.maximum.at(top, t.contestant[rows], t.judge_score[rows])
    rows = rows[t.judge_score[rows] == top[t.contestant[rows]]]  # only a best judge score can win
    speed_up = np.nan_to_num(t.score[rows], nan=WORST)
    completeness = np.nan_to_num(t.completeness[rows], nan=WORST)
    order = np.lexsort(
        (
            t.submission_id[rows],
            t.submitted_at[rows],
            -completeness,
            -speed_up,
            -t.judge_score[rows],
            t.contestant[rows],
        )
    )
    starts, _ = columnar.runs(t.contestant[rows][order])
    best = rows[order][starts]
    found = dict(
        zip(
            t.contestant[best].tolist(),
            zip(
                t.judge_score[best].tolist(),
                t.score[best].tolist(),
                t.completeness[best].tolist(),
                t.submission_id[best].tolist(),
                t.problem[best].tolist(),
            ),
        )
    )
    names, problems, candidates = t.names["contestant"], t.names["problem"], []
    for code in c.scoped.contestants.tolist():
        if code not in found:
            candidates.append(Candidate(contestant=names[code], total=0.0, keys=(WORST, WORST)))
            continue
        judge, score, done, sid, problem = found[code]
        figures: dict[str, int | float | str] = {"best submission": sid}
        if score == score:  # not NaN
            figures["speed-up"] = score
        if done == done:
            figures["completeness"] = done
        candidates.append(
            Candidate(
                contestant=names[code],
                total=judge,
                keys=(score if score == score else WORST, done if done == done else WORST),
                breakdown={problems[problem]: judge},
                figures=figures,
            )
        )
    return rank(contest, candidates, TIE_RULES)
