"""Which entries a contest counts: ranked runs, submitted inside the window, on the contest's
problems and device kinds, and (where screening is on) not flagged as resubmissions.

Standings are recomputed from every entry of a contest (500,000 in bench/standings.py), and
touching an entry costs far more than the work done with it: each function here reads an
entry once, and the rules read what these give them once."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from gpuarena.contests.model import PASSED, RANKED, Contest, Entry
from gpuarena.contests.resubmission import counting_entry, screen_group


def board_key(problem: str, device_kind: str) -> str:
    """How the speed-ranked rules name a problem on a device kind (a row's breakdown keys)."""
    return f"{problem}@{device_kind}"


def in_scope(contest: Contest, entry: Entry) -> bool:
    """The window is half-open: start <= submitted_at < end."""
    return (
        entry.mode == RANKED
        and contest.start <= entry.submitted_at < contest.end
        and entry.problem in contest.problems
        and entry.device_kind in contest.device_kinds
    )


def iter_scoped(contest: Contest, entries: Iterable[Entry]) -> Iterator[Entry]:
    """The entries in scope (in_scope), lazily, with set look-ups."""
    problems, devices = set(contest.problems), set(contest.device_kinds)
    start, end = contest.start, contest.end
    for e in entries:
        if e.mode == RANKED and e.problem in problems and e.device_kind in devices and start <= e.submitted_at < end:
            yield e


def scoped(contest: Contest, entries: Iterable[Entry]) -> list[Entry]:
    return list(iter_scoped(contest, entries))


def screens(contest: Contest, rule_default: bool) -> bool:
    """Whether flagged resubmissions are left out: the contest's choice, else the rule's."""
    screen = contest.resubmission.screen
    return rule_default if screen is None else screen


def counted(contest: Contest, entries: Iterable[Entry], *, screen_by_default: bool) -> Iterable[Entry]:
    """The entries a rule reads, in their given order, to be read once: without screening a
    lazy pass (one touch of each entry). Resubmissions are screened among the entries in scope
    only: a submission before the contest or in test mode sets no best to beat."""
    if not screens(contest, screen_by_default):
        return iter_scoped(contest, entries)
    scoped_entries = list(iter_scoped(contest, entries))
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, e in enumerate(scoped_entries):
        if e.score is not None and e.status == PASSED:
            groups.setdefault((e.contestant, e.problem, e.device_kind), []).append(i)
    policy = contest.resubmission
    kept: list[Entry | None] = list(scoped_entries)
    for group in groups.values():
        if len(group) > 1:
            position = {id(scoped_entries[i]): i for i in group}
            for flagged, _, _ in screen_group([scoped_entries[i] for i in group], policy):
                kept[position[id(flagged)]] = None
    return [e for e in kept if e is not None]


@dataclass(frozen=True, slots=True)
class Board:
    """The best speed-ups on one problem and device kind, packed: ranking a board reads them
    all, and reading an array costs far less than going back to 10,000 scattered entries."""

    contestants: list[str]
    scores: array[float]
    """scores[i] is the speed-up of contestants[i]'s best counted entry."""


@dataclass(frozen=True, slots=True)
class Bests:
    """Each contestant's best counted entry per problem and device kind (board)."""

    entries: dict[str, dict[str, Entry]]
    """Contestant -> board key -> entry; every contestant with a counted entry, {} when none passed."""
    scores: dict[str, dict[str, float]]
    """Contestant -> board key -> that entry's speed-up (the same keys as entries)."""
    boards: dict[str, Board]
    """Board key -> the board's speed-ups; boards nobody passed are missing."""


def best_counted(contest: Contest, entries: Iterable[Entry], *, screen_by_default: bool) -> Bests:
    """The best counted entry of each contestant on each problem and device kind (higher
    speed-up, then the earlier, then the lower submission id): what the speed-ranked rules
    read. The same entries as from counted(), in one pass without a list, which reads each
    entry once, in the given order: a contestant's first passing entry on a board is taken as
    it is, and only where a second one comes is the group screened and chosen from afterwards
    (a few percent of the boards in a contest)."""
    start, end = contest.start, contest.end
    slots: dict[str, dict[str, tuple[str, dict[str, int], list[str], array[float]]]] = {
        p: {d: (board_key(p, d), {}, [], array("d")) for d in contest.device_kinds} for p in contest.problems
    }
    by_contestant: dict[str, tuple[dict[str, Entry], dict[str, float]]] = {}
    groups: dict[tuple[str, str], list[Entry]] = {}
    # The hot loop, measured (bench/standings.py): fields read from the instance dict (where
    # pydantic keeps them; a third faster than attribute access), subscripts and try rather
    # than get().
    for e in entries:
        fields = e.__dict__
        if fields["mode"] != RANKED:
            continue
        try:
            key, position, contestants, scores = slots[fields["problem"]][fields["device_kind"]]
        except KeyError:
            continue  # not a problem or device kind of the contest
        at = fields["submitted_at"]
        if at < start or at >= end:
            continue
        contestant = fields["contestant"]
        try:
            best, mine = by_contestant[contestant]
        except KeyError:
            best, mine = by_contestant[contestant] = ({}, {})
        score = fields["score"]
        if score is None or fields["status"] != PASSED:
            continue
        if key not in best:
            best[key] = e
            mine[key] = score
            position[contestant] = len(contestants)
            contestants.append(contestant)
            scores.append(score)
        else:
            group = groups.get((contestant, key))
            if group is None:
                groups[(contestant, key)] = [best[key], e]
            else:
                group.append(e)
    screen, policy = screens(contest, screen_by_default), contest.resubmission
    slot_of = {slot[0]: slot for by_device in slots.values() for slot in by_device.values()}
    for (contestant, key), group in groups.items():
        # grouped entries passed with a speed-up: score is a float
        chosen = (
            counting_entry(group, policy)
            if screen
            else min(group, key=lambda e: (-cast(float, e.score), e.submitted_at, e.submission_id))
        )
        assert chosen.score is not None
        own = by_contestant[contestant]
        own[0][key] = chosen
        own[1][key] = chosen.score
        _, position, _, scores = slot_of[key]
        scores[position[contestant]] = chosen.score
    return Bests(
        entries={c: mine[0] for c, mine in by_contestant.items()},
        scores={c: mine[1] for c, mine in by_contestant.items()},
        boards={key: Board(contestants, scores) for key, _, contestants, scores in slot_of.values() if contestants},
    )


def before_freeze(contest: Contest, entries: Iterable[Entry]) -> list[Entry]:
    """The entries the frozen public standings show: those submitted before freeze_at. The
    service passes these to the rule while the standings are frozen, all entries after."""
    freeze_at = contest.freeze_at
    return [e for e in entries if e.submitted_at < freeze_at]
