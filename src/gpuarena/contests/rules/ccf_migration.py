"""ccf-migration: code migrated to another platform, scored by a judge (60 runs, 61-100 by
output match, up to +50 for the speed-up; the figure comes with each entry). Only a
contestant's best entry counts, over the whole contest; ties by the larger speed-up, then
the larger completeness (both of that best entry)."""

from __future__ import annotations

from collections.abc import Iterable

from gpuarena.contests.eligibility import counted
from gpuarena.contests.model import CcfMigrationRule, Contest, Entry, Standings
from gpuarena.contests.ranking import WORST, Candidate, rank

SCREEN_BY_DEFAULT = False
"""The judge scores each entry; a resubmission with a better output match but the same
speed-up must still count."""
TIE_RULES = ["larger speed-up", "larger completeness"]


def _merit(e: Entry) -> tuple[float, float, float, float, int]:
    """Judge score, speed-up, completeness, then the earlier submission (larger is better)."""
    return (e.judge_score, e.score if e.score is not None else WORST,
            e.completeness if e.completeness is not None else WORST, -e.submitted_at.timestamp(), -e.submission_id)


def standings(contest: Contest, entries: Iterable[Entry]) -> Standings:
    rule = contest.rule
    if not isinstance(rule, CcfMigrationRule):
        raise ValueError(f"contest {contest.slug} uses rule {rule.name}, not ccf-migration")
    best: dict[str, Entry | None] = {}
    for e in counted(contest, entries, screen_by_default=SCREEN_BY_DEFAULT):
        current = best.get(e.contestant)
        if e.judge_score is None:
            if e.contestant not in best:
                best[e.contestant] = None
        elif current is None or e.judge_score > current.judge_score or (
                e.judge_score == current.judge_score and _merit(e) > _merit(current)):
            best[e.contestant] = e
    candidates = []
    for c, e in best.items():
        if e is None:
            candidates.append(Candidate(contestant=c, total=0.0, keys=(WORST, WORST)))
            continue
        judge, speed_up, completeness, _, _ = _merit(e)
        figures: dict[str, int | float | str] = {"best submission": e.submission_id}
        if e.score is not None:
            figures["speed-up"] = e.score
        if e.completeness is not None:
            figures["completeness"] = e.completeness
        candidates.append(Candidate(contestant=c, total=judge, keys=(speed_up, completeness),
                                    breakdown={e.problem: judge}, figures=figures))
    return rank(contest, candidates, TIE_RULES)
