"""A contest's entries as columns: one numpy array per field, one row per entry, names coded
as integers. What the rules read at scale: 560,000 Entry records cost a second just to be
touched once in Python (bench/standings.py), while masks, sorts and group reductions over
columns cost tens of milliseconds. The service keeps one table per contest, filled straight
from its rows and updated in place as results and reviews arrive (contest_standings.py);
the rules still take a list of Entry too (tests, small contests): both paths give the same
standings (tests/contests/test_table.py)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter

import numpy as np

from gpuarena.contests.model import BONUS_ITEMS, PASSED, RANKED, Entry

COLUMNS: tuple[str, ...] = tuple(Entry.model_fields)
"""The fields of Entry, in its order: the order of the rows from_rows reads."""
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH = EPOCH.replace(tzinfo=None)
_US = dt.timedelta(microseconds=1)
_BONUS_BIT = {item: 1 << i for i, item in enumerate(BONUS_ITEMS)}
BONUS_COUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.int64)
"""Bonus items in a bonus bit mask, by mask."""
_ACCEPTED = {True: 1, False: 0, None: -1}
_NAMED = ("contestant", "problem", "device_kind", "status", "mode")
_FLOATS = (
    "score",
    "score_low",
    "score_high",
    "max_abs_error",
    "max_rel_error",
    "samples_score",
    "judge_score",
    "completeness",
)


def micros(value: dt.datetime | str) -> int:
    """Microseconds since 1970 UTC of an aware time, a naive UTC one, or SQLite's text."""
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return (value - (EPOCH if value.tzinfo is not None else _NAIVE_EPOCH)) // _US


def as_datetime(us: int) -> dt.datetime:
    """The aware UTC time of micros(): exactly the Entry's submitted_at."""
    return EPOCH + dt.timedelta(microseconds=us)


def _times(values: Sequence) -> np.ndarray:
    """Times as int64 microseconds: SQLite's text parsed by numpy (fifty times faster than
    datetime objects), datetimes by exact integer arithmetic."""
    if len(values) and isinstance(values[0], str):
        try:
            return np.array(values, dtype="datetime64[us]").astype(np.int64)
        except ValueError:  # an offset in the text: numpy reads naive times only
            pass
    return np.fromiter(map(micros, values), dtype=np.int64, count=len(values))


def _bonus_mask(value: list | str | None) -> int:
    """Bonus items as bits: a list, or its JSON text as SQLite keeps it."""
    if not value or value == "[]":
        return 0
    if isinstance(value, str):
        value = json.loads(value)
    mask = 0
    for item in value:
        mask |= _BONUS_BIT[item]
    return mask


class EntryTable:
    """Entries as columns. Names are coded per table (names[column][code]); times are int64
    microseconds since 1970 UTC; a missing figure is NaN; accepted is 1, 0 or -1 (not reviewed);
    bonus is a bit mask over BONUS_ITEMS. Rows are in no particular order: every rule breaks
    its ties by fields, never by position."""

    __slots__ = (
        "names",
        "codes",
        "submission_id",
        "contestant",
        "problem",
        "level",
        "device_kind",
        "status_passed",
        "ranked",
        "score",
        "score_low",
        "score_high",
        "max_abs_error",
        "max_rel_error",
        "submitted_at",
        "accepted",
        "merged_upstream",
        "bonus",
        "samples_accepted",
        "samples_score",
        "judge_score",
        "completeness",
        "cache",
        "_position",
    )

    names: dict[str, list[str]]
    codes: dict[str, dict[str, int]]
    submission_id: np.ndarray
    contestant: np.ndarray
    problem: np.ndarray
    level: np.ndarray
    device_kind: np.ndarray
    status_passed: np.ndarray
    ranked: np.ndarray
    score: np.ndarray
    score_low: np.ndarray
    score_high: np.ndarray
    max_abs_error: np.ndarray
    max_rel_error: np.ndarray
    submitted_at: np.ndarray
    accepted: np.ndarray
    merged_upstream: np.ndarray
    bonus: np.ndarray
    samples_accepted: np.ndarray
    samples_score: np.ndarray
    judge_score: np.ndarray
    completeness: np.ndarray
    _position: dict[int, int] | None
    """Row of each submission id, built by the first upsert."""
    cache: dict
    """What is computed from the rows (columnar.counted), until they change."""

    def __len__(self) -> int:
        return len(self.submission_id)

    @property
    def passed(self) -> np.ndarray:
        """Passed with a speed-up (Entry.passed)."""
        return self.status_passed & ~np.isnan(self.score)

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence], *, failed_scores: bool = True) -> EntryTable:
        """A table from rows of Entry's fields in COLUMNS order, with the values an Entry holds
        (a time may also be SQLite's text, bonus its JSON text). failed_scores=False drops the
        speed-up figures of a run that did not pass, as the service reads its tables."""
        columns = list(zip(*rows)) if rows else [()] * len(COLUMNS)
        return cls.from_columns(dict(zip(COLUMNS, columns)), failed_scores=failed_scores)

    @classmethod
    def from_entries(cls, entries: Iterable[Entry]) -> EntryTable:
        """Column by column (a third faster than row tuples transposed): reading 560,000
        entries' fields still takes seconds, which is why the service keeps tables."""
        fields = [e.__dict__ for e in entries]
        return cls.from_columns({name: list(map(itemgetter(name), fields)) for name in COLUMNS})

    @classmethod
    def from_columns(
        cls,
        columns: Mapping[str, Sequence],
        *,
        failed_scores: bool = True,
        codes: dict[str, dict[str, int]] | None = None,
    ) -> EntryTable:
        """A table from one sequence per field (COLUMNS); codes: name codes to extend (upsert)."""
        t = cls.__new__(cls)
        t.codes = codes if codes is not None else {name: {} for name in _NAMED}
        n = len(columns["submission_id"])
        for name in _NAMED:
            index = t.codes[name]
            for v in dict.fromkeys(columns[name]):  # a few thousand names in 560,000 rows
                index.setdefault(v, len(index))
            coded = list(map(index.__getitem__, columns[name]))
            if name == "status":
                t.status_passed = np.array(coded, dtype=np.int32) == index.get(PASSED, -1)
            elif name == "mode":
                t.ranked = np.array(coded, dtype=np.int32) == index.get(RANKED, -1)
            else:
                setattr(t, name, np.array(coded, dtype=np.int32))
        t.names = {name: list(index) for name, index in t.codes.items()}
        t.submission_id = np.array(columns["submission_id"], dtype=np.int64)
        t.level = np.array(columns["level"], dtype=np.int64)
        for name in _FLOATS:
            setattr(t, name, np.array(columns[name], dtype=np.float64).reshape(n))
        t.accepted = np.array(list(map(_ACCEPTED.__getitem__, columns["accepted_by_organizer"])), dtype=np.int8)
        t.status_passed &= t.accepted != 0  # an entry an organizer rejected passes no rule (rules.counting)
        if not failed_scores:
            for name in ("score", "score_low", "score_high"):
                setattr(t, name, np.where(t.status_passed, getattr(t, name), np.nan))
        t.submitted_at = _times(columns["submitted_at"])
        t.merged_upstream = np.array(columns["merged_upstream"], dtype=bool).reshape(n)
        t.bonus = np.fromiter(map(_bonus_mask, columns["bonus"]), dtype=np.uint8, count=n)
        t.samples_accepted = np.array(columns["samples_accepted"], dtype=np.int64).reshape(n)
        rejected = t.accepted == 0  # nothing of a rejected entry counts (rules.counting)
        if rejected.any():
            for name in ("score", "score_low", "score_high", "judge_score", "samples_score"):
                getattr(t, name)[rejected] = np.nan if name != "samples_score" else 0.0
            t.samples_accepted[rejected] = 0
            t.bonus[rejected] = 0
        t._position, t.cache = None, {}
        return t

    _ARRAYS = (
        "submission_id",
        "contestant",
        "problem",
        "level",
        "device_kind",
        "status_passed",
        "ranked",
        "score",
        "score_low",
        "score_high",
        "max_abs_error",
        "max_rel_error",
        "submitted_at",
        "accepted",
        "merged_upstream",
        "bonus",
        "samples_accepted",
        "samples_score",
        "judge_score",
        "completeness",
    )

    def take(self, rows: np.ndarray) -> EntryTable:
        """The rows chosen by a mask or indices (the frozen view), sharing the names."""
        t = EntryTable.__new__(EntryTable)
        t.names, t.codes, t._position, t.cache = self.names, self.codes, None, {}
        for name in self._ARRAYS:
            setattr(t, name, getattr(self, name)[rows])
        return t

    def upsert(self, columns: Mapping[str, Sequence], *, failed_scores: bool = True) -> None:
        """Rows (one sequence per field, as from_columns reads them) replace the rows of the
        same submission id, in place, or are added: a changed result or review costs its own
        rows, not a rebuilt table."""
        new = EntryTable.from_columns(columns, failed_scores=failed_scores, codes=self.codes)
        if not len(new):
            return
        self.names, self.cache = new.names, {}
        if self._position is None:
            self._position = dict(zip(self.submission_id.tolist(), range(len(self))))
        position = self._position
        at = np.array([position.get(sid, -1) for sid in new.submission_id.tolist()], dtype=np.int64)
        old, added = at >= 0, at < 0
        for name in self._ARRAYS:
            column, values = getattr(self, name), getattr(new, name)
            column[at[old]] = values[old]
            if added.any():
                setattr(self, name, np.concatenate([column, values[added]]))
        for sid in new.submission_id[added].tolist():
            position[sid] = len(position)
