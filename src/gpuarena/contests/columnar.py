"""Which rows of an EntryTable a contest counts, and each contestant's best per board: the
column twin of eligibility.py, with its semantics (half-open window, ranked runs, the
contest's problems and device kinds; screening in submission order; the best by speed-up,
then the earlier, then the lower id). Scope is a mask; passing rows are grouped by
(contestant, board) with one integer argsort, and only the groups of two or more (a few
percent) are sorted by time; screening walks position j of every such group at once, so its
Python loop runs as many times as the longest group is long, not once per entry."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from gpuarena.contests.eligibility import board_key, screens
from gpuarena.contests.model import Contest, ResubmissionPolicy
from gpuarena.contests.table import EntryTable, micros


def _index(names: list[str], wanted: list[str]) -> np.ndarray:
    """Per name code: its index in wanted, -1 where it is not there."""
    where = {name: i for i, name in enumerate(wanted)}
    return np.array([where.get(name, -1) for name in names], dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Scoped:
    """The rows a contest counts, with the board (problem x device kind, contest order) of each."""

    rows: np.ndarray
    """Row indices, ascending."""
    board: np.ndarray
    """rows[i]'s board: problem index * device kinds + device kind index."""
    boards: list[str]
    """Board index -> board_key(problem, device_kind), as the rows' breakdowns name them."""
    contestants: np.ndarray
    """Contestant codes with a row in scope: every one of them gets a standings row."""


def scope(contest: Contest, t: EntryTable) -> Scoped:
    """eligibility.in_scope over the table."""
    problem = _index(t.names["problem"], contest.problems)[t.problem]
    device = _index(t.names["device_kind"], contest.device_kinds)[t.device_kind]
    at = t.submitted_at
    mask = t.ranked & (problem >= 0) & (device >= 0) & (at >= micros(contest.start)) & (at < micros(contest.end))
    rows = np.flatnonzero(mask)
    kinds = len(contest.device_kinds)
    return Scoped(
        rows=rows,
        board=problem[rows] * kinds + device[rows],
        boards=[board_key(p, d) for p in contest.problems for d in contest.device_kinds],
        contestants=np.unique(t.contestant[rows]),
    )


def _flags(t: EntryTable, e: np.ndarray, best: np.ndarray, policy: ResubmissionPolicy) -> np.ndarray:
    """resubmission._codes for many (entry, best so far) pairs at once: is each one flagged.
    NaN compares false, as a missing error figure never flags."""
    low = np.where(np.isnan(t.score_low[e]), t.score[e], t.score_low[e])
    factor = policy.error_factor
    return (
        (low <= t.score[best])
        | (t.max_abs_error[e] > t.max_abs_error[best] * factor)
        | (t.max_rel_error[e] > t.max_rel_error[best] * factor)
    )


def runs(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start positions and sizes of the runs of equal values of a sorted key."""
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    return starts, np.diff(np.r_[starts, len(key)])


@dataclass(frozen=True, slots=True)
class Counted:
    """What the rules read: the scope, the rows left after screening, and the best counted
    passing row of each contestant on each board."""

    scoped: Scoped
    rows: np.ndarray
    """The counted rows (eligibility.counted), ascending."""
    board: np.ndarray
    """rows[i]'s board."""
    best: np.ndarray
    """Row indices: each contestant's best counted passing row per board (eligibility.best_counted),
    sorted by contestant code, then board."""
    best_board: np.ndarray
    """best[i]'s board."""


def counted(contest: Contest, t: EntryTable, *, screen_by_default: bool) -> Counted:
    """Kept on the table (EntryTable.cache) until it changes: the service reads the same
    counted rows for the rule and for the per-problem bests."""
    screen = screens(contest, screen_by_default)
    key = (contest.model_dump_json(), screen)
    found = t.cache.get(key)
    if found is None:
        found = t.cache[key] = _counted(contest, t, screen)
    return found


def _counted(contest: Contest, t: EntryTable, screen: bool) -> Counted:
    s = scope(contest, t)
    passing = np.flatnonzero(t.passed[s.rows])  # positions in the scope
    rows, boards = s.rows[passing], max(len(s.boards), 1)
    key = t.contestant[rows].astype(np.int64) * boards + s.board[passing]
    order = np.argsort(key, kind="stable")
    starts, sizes = runs(key[order])
    best = order[starts]  # per (contestant, board) group, in key order: a single entry is its own best
    several = np.flatnonzero(sizes > 1)  # a few percent of the groups: only they are sorted by time
    flagged = np.zeros(0, dtype=np.int64)
    if len(several):
        group = order[np.repeat(sizes > 1, sizes)]
        sub, at, gk = t.submission_id[rows[group]], t.submitted_at[rows[group]], key[group]
        if screen:
            # Each group in submission order; position j of every group longer than j is
            # compared with its group's best so far (resubmission.screen_group), all at once.
            ordered = group[np.lexsort((sub, at, gk))]
            first, length = runs(key[ordered])
            best_at, bad_at = first.copy(), np.zeros(len(ordered), dtype=bool)
            for j in range(1, int(length.max())):
                g = np.flatnonzero(length > j)
                position = first[g] + j
                bad = _flags(t, rows[ordered[position]], rows[ordered[best_at[g]]], contest.resubmission)
                bad_at[position[bad]] = True
                best_at[g[~bad]] = position[~bad]
            best[several], flagged = ordered[best_at], ordered[bad_at]
        else:
            ordered = group[np.lexsort((sub, at, -t.score[rows[group]], gk))]
            best[several] = ordered[runs(key[ordered])[0]]
    keep = np.ones(len(s.rows), dtype=bool)
    keep[passing[flagged]] = False
    return Counted(scoped=s, rows=s.rows[keep], board=s.board[keep], best=rows[best], best_board=s.board[passing[best]])


def spans(codes: np.ndarray) -> dict[int, tuple[int, int]]:
    """Code -> (start, end) of its run in codes, which are sorted."""
    starts, sizes = runs(codes)
    return dict(zip(codes[starts].tolist(), zip(starts.tolist(), (starts + sizes).tolist())))


def each(contestants: np.ndarray, span: dict[int, tuple[int, int]]) -> Iterator[tuple[int, int, int]]:
    """(code, start, end) for every contestant in scope; (code, 0, 0) for one without rows."""
    for code in contestants.tolist():
        lo, hi = span.get(code, (0, 0))
        yield code, lo, hi


@dataclass(frozen=True, slots=True)
class BestsByContestant:
    """Counted.best (sorted by contestant, then board) as the Python lists the rows'
    breakdowns are built from, and each contestant's span in them."""

    keys: list[str]
    """Board keys."""
    scores: list[float]
    span: dict[int, tuple[int, int]]


def bests_by_contestant(c: Counted, t: EntryTable) -> BestsByContestant:
    keys = np.array(c.scoped.boards, dtype=object)[c.best_board].tolist() if len(c.best) else []
    return BestsByContestant(keys=keys, scores=t.score[c.best].tolist(), span=spans(t.contestant[c.best]))
