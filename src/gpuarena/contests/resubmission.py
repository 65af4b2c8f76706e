"""Resubmission screening: a contestant's new submission of a problem on a device kind counts
only when it is a real improvement on their best so far. Resubmitting until timing noise
gives a lucky figure, or trading precision for speed, is flagged, with a reason the
contestant can read; eligibility.counted leaves flagged entries out where the rule says so."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal

from gpuarena.contests.model import PASSED, Entry, ResubmissionPolicy, Strict

FlagCode = Literal["not-above-best", "larger-error"]
ERROR_FIGURES = (("max_abs_error", "max absolute error"), ("max_rel_error", "max relative error"))


class Flag(Strict):
    """The screening's verdict on one submission."""

    submission_id: int
    flagged: bool
    codes: list[FlagCode] = []
    """Why, for machines: not-above-best (the interval does not clear the best so far),
    larger-error (an error figure grew)."""
    reason: str | None = None
    """Why, for the contestant."""
    previous_best: int | None = None
    """The submission it was compared with: the best so far on this problem and device kind."""


def screened(entry: Entry) -> bool:
    """Only passing entries with a speed-up are screened, and only they set a best to beat."""
    return entry.score is not None and entry.status == PASSED


def _codes(entry: Entry, best: Entry, policy: ResubmissionPolicy) -> list[FlagCode]:
    """What is wrong with a resubmission, if anything (comparisons only: this runs on every
    standings update; the contestant's text is written by explain())."""
    codes: list[FlagCode] = []
    low = entry.score_low if entry.score_low is not None else entry.score
    assert low is not None and best.score is not None  # screened entries only: both have a speed-up
    if low <= best.score:
        codes.append("not-above-best")
    for name, _ in ERROR_FIGURES:
        new, old = getattr(entry, name), getattr(best, name)
        if new is not None and old is not None and new > old * policy.error_factor:
            codes.append("larger-error")
            break
    return codes


def explain(entry: Entry, best: Entry, policy: ResubmissionPolicy) -> str:
    """The reasons of a flag, for the contestant."""
    reasons = []
    low = entry.score_low if entry.score_low is not None else entry.score
    assert low is not None and best.score is not None  # screened entries only: both have a speed-up
    if low <= best.score:
        interval = (
            f" (interval {entry.score_low:.3g}-{entry.score_high:.3g})"
            if entry.score_low is not None and entry.score_high is not None
            else ""
        )
        reasons.append(
            f"speed-up {entry.score:.3g}x{interval} does not clear your best so far, "
            f"{best.score:.3g}x (submission {best.submission_id}): a resubmission counts when "
            f"the low end of its interval is above your best"
        )
    for name, label in ERROR_FIGURES:
        new, old = getattr(entry, name), getattr(best, name)
        if new is not None and old is not None and new > old * policy.error_factor:
            reasons.append(
                f"{label} {new:.3g} is larger than that of your best so far, {old:.3g} "
                f"(submission {best.submission_id}): a resubmission may not trade precision for speed"
            )
    return "; ".join(reasons)


def screen_group(group: list[Entry], policy: ResubmissionPolicy) -> Iterator[tuple[Entry, Entry, list[FlagCode]]]:
    """(entry, best so far, codes) for each flagged entry of one contestant's screened
    entries for one problem on one device kind. They go in submission order; an unflagged one
    becomes the best (its low end is above the best's score, so it is better), a flagged one
    never does."""
    ordered = sorted(group, key=lambda e: (e.submitted_at, e.submission_id))
    best = ordered[0]
    for e in ordered[1:]:
        codes = _codes(e, best, policy)
        if codes:
            yield e, best, codes
        else:
            best = e


def counting_entry(group: list[Entry], policy: ResubmissionPolicy) -> Entry:
    """Of one contestant's screened entries for one problem on one device kind, the one that
    counts: the best after screening (the last unflagged one in submission order). The walk of
    screen_group without records; most groups are a pair, which takes no sort."""
    if len(group) == 2:
        best, e = group
        if (e.submitted_at, e.submission_id) < (best.submitted_at, best.submission_id):
            best, e = e, best
        return best if _codes(e, best, policy) else e
    ordered = sorted(group, key=lambda e: (e.submitted_at, e.submission_id))
    best = ordered[0]
    for e in ordered[1:]:
        if not _codes(e, best, policy):
            best = e
    return best


def _groups(entries: Iterable[Entry]) -> Iterator[list[Entry]]:
    """The screened entries by (contestant, problem, device kind), groups of two or more only."""
    groups: dict[tuple[str, str, str], list[Entry]] = {}
    for e in entries:
        if screened(e):
            groups.setdefault((e.contestant, e.problem, e.device_kind), []).append(e)
    return (g for g in groups.values() if len(g) > 1)


def flagged_ids(entries: Iterable[Entry], policy: ResubmissionPolicy = ResubmissionPolicy()) -> set[int]:
    """Submission ids of the flagged entries."""
    return {e.submission_id for g in _groups(entries) for e, _, _ in screen_group(g, policy)}


def flag_resubmissions(entries: Iterable[Entry], policy: ResubmissionPolicy = ResubmissionPolicy()) -> dict[int, Flag]:
    """A flag for every given submission, by id (unflagged ones too, so each can be shown)."""
    entries = list(entries)
    flags = {e.submission_id: Flag(submission_id=e.submission_id, flagged=False) for e in entries}
    for group in _groups(entries):
        for e, best, codes in screen_group(group, policy):
            flags[e.submission_id] = Flag(
                submission_id=e.submission_id,
                flagged=True,
                codes=codes,
                reason=explain(e, best, policy),
                previous_best=best.submission_id,
            )
    return flags
