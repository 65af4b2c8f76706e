"""A contest's standings in the service: computed by the contest's rule from its entries, kept
per server process and brought up to date from the entries changed since the last read."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import TypeAdapter
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from gpuarena.contests import columnar
from gpuarena.contests import rules as contest_rules
from gpuarena.contests.model import Contest, Row, Standings
from gpuarena.contests.table import COLUMNS, EntryTable, micros
from gpuarena.service.contest_entries import RULE_ROWS_STAMPED, as_time, rule_columns
from gpuarena.service.contest_schemas import ContestSpec, ProblemBest, StandingsOut
from gpuarena.service.contests import is_organizer, phase, spec_of
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden
from gpuarena.service.tables import ContestEntry, ContestRow, utcnow

SCREEN_BY_DEFAULT = {
    "fastest": contest_rules.fastest.SCREEN_BY_DEFAULT,
    "fast_p": contest_rules.fast_p.SCREEN_BY_DEFAULT,
    "ccf-kernel": contest_rules.ccf_kernel.SCREEN_BY_DEFAULT,
    "ccf-dataset": contest_rules.ccf_dataset.SCREEN_BY_DEFAULT,
    "ccf-migration": contest_rules.ccf_migration.SCREEN_BY_DEFAULT,
}


def _per_problem_best(spec: ContestSpec, contest: Contest, t: EntryTable) -> list[ProblemBest]:
    """The best counted, passing, not rejected speed-up per board: higher speed-up, then the
    earlier, then the first submitted (one lexsort over the counted rows)."""
    c = columnar.counted(contest, t, screen_by_default=SCREEN_BY_DEFAULT[spec.rule.name])
    shown = t.passed[c.rows] & (t.accepted[c.rows] != 0)
    rows, board = c.rows[shown], c.board[shown]
    top = np.full(len(c.scoped.boards), -np.inf)
    np.maximum.at(top, board, t.score[rows])
    reach = np.flatnonzero(t.score[rows] == top[board])  # the board's best speed-up: a few rows
    best: dict[int, tuple[int, int, int]] = {}
    for b, at, sid, r in zip(
        board[reach].tolist(),
        t.submitted_at[rows[reach]].tolist(),
        t.submission_id[rows[reach]].tolist(),
        rows[reach].tolist(),
    ):
        if b not in best or (at, sid) < best[b][:2]:
            best[b] = (at, sid, r)
    names, out = t.names["contestant"], []
    for i, (p, d) in enumerate((p, d) for p in spec.problems for d in spec.device_kinds):
        r = best[i][2] if i in best else None
        out.append(
            ProblemBest(problem=p, device_kind=d)
            if r is None
            else ProblemBest(
                problem=p,
                device_kind=d,
                contestant=names[t.contestant[r]],
                score=float(t.score[r]),
                submission_id=int(t.submission_id[r]),
            )
        )
    return out


LAG = dt.timedelta(minutes=1)
"""How far back before the newest change seen the kept entries are checked again: a write is
stamped when made and seen when committed, so a slow transaction can land after a newer one."""


@dataclass
class _Kept:
    """A contest's entries as the rules read them (contests.table: columns, filled straight
    from the rows), kept in this process and brought up to date on each read with the entries
    changed since (contest_entries.updated_at, indexed), in place: a result or a review costs
    its own rows and the rule's run over the columns, not a reread of every entry."""

    config: str
    table: EntryTable = field(default_factory=lambda: EntryTable.from_columns({n: [] for n in COLUMNS}))
    updated: dict[int, str] = field(default_factory=dict)
    """Submission id -> the updated_at applied (as stored)."""
    seen: dt.datetime | None = None
    shown: dict[bool, StandingsOut] = field(default_factory=dict)
    """Standings computed from these entries, by frozen view; cleared when an entry changes."""
    json: dict[int, tuple[StandingsOut, bytes]] = field(default_factory=dict)
    """id(shown standings) -> them and their JSON (standings_json); cleared with shown."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, rows: Sequence[tuple]) -> bool:
        updated = self.updated
        fresh = [r for r in rows if updated.get(r[0]) != r[-1]] if updated else rows
        if not fresh:
            return False
        columns = list(zip(*fresh))
        stamps = columns.pop()
        self.table.upsert(rule_columns(columns), failed_scores=False)
        updated.update(zip(columns[0], stamps))
        newest = as_time(max(stamps))
        self.seen = newest if self.seen is None or newest > self.seen else self.seen
        self.shown.clear()
        self.json.clear()
        return True


_kept: dict[tuple[str, int], _Kept] = {}
_kept_lock = threading.Lock()


def _kept_entries(session: Session, row: ContestRow) -> _Kept:
    """The contest's kept entries, up to date (the caller holds kept.lock)."""
    config = json.dumps(row.config, sort_keys=True)
    bind = session.get_bind()
    assert isinstance(bind, Engine)  # Database's sessions are bound to its engines
    key = (str(bind.url), row.id)
    with _kept_lock:
        kept = _kept.get(key)
        if kept is None or kept.config != config:
            kept = _kept[key] = _Kept(config=config)
    return kept


def _refresh(session: Session, row: ContestRow, kept: _Kept) -> None:
    query = RULE_ROWS_STAMPED.where(ContestEntry.contest_id == row.id)
    if kept.seen is not None:
        query = query.where(ContestEntry.updated_at >= kept.seen - LAG)
    result = session.connection().execute(query)
    try:  # the driver's plain tuples: building 560,000 Row objects costs a second and more
        rows = result.cursor.fetchall()
    finally:
        result.close()
    kept.apply(rows)


def shown_frozen(session: Session, row: ContestRow, viewer: Caller | None, live: bool = False) -> bool:
    """Which standings a viewer sees: during a freeze the public ones (True), counting only
    entries submitted before freeze_at; the contest's organizers may ask for the live ones."""
    frozen = phase(spec_of(row)) == "frozen"
    if live and frozen and not is_organizer(session, row, viewer):
        raise Forbidden(f"the standings of {row.slug} are frozen; only its organizers see the live ones")
    return frozen and not live


def computed(session: Session, row: ContestRow, frozen_view: bool) -> StandingsOut:
    """The public frozen (frozen_view) or live standings, from the kept entries (_Kept), kept
    until an entry changes."""
    spec = spec_of(row)
    kept = _kept_entries(session, row)
    with kept.lock:
        _refresh(session, row, kept)
        shown = kept.shown.get(frozen_view)
        if shown is None:
            table = kept.table
            if frozen_view:
                table = table.take(table.submitted_at < micros(spec.freeze_at))
            contest = spec.scoring()
            shown = kept.shown[frozen_view] = StandingsOut(
                standings=contest_rules.standings(contest, table),
                frozen=frozen_view,
                live=not frozen_view,
                computed_at=utcnow(),
                per_problem_best=_per_problem_best(spec, contest, table),
            )
    return shown


def standings(session: Session, row: ContestRow, viewer: Caller | None, live: bool = False) -> StandingsOut:
    """The standings a viewer may see (shown_frozen), computed in this process."""
    return computed(session, row, shown_frozen(session, row, viewer, live))


_ROWS = TypeAdapter(list[Row])
CHUNK = 500
"""Rows serialized per call: one call holds the GIL throughout, and 10,000 rows of 50 problems
(12 MB of JSON) in one would stall every other request of the process for a third of a second
(bench/contest_leaderboard_reads.py)."""


def computed_json(session: Session, row: ContestRow, frozen_view: bool) -> bytes:
    """computed() as the API's JSON, serialized once per change and in chunks of rows, so
    that polling clients cost nothing and other requests run between the chunks."""
    shown = computed(session, row, frozen_view)
    kept = _kept_entries(session, row)
    cached = kept.json.get(id(shown))
    if cached is not None and cached[0] is shown:
        return cached[1]
    head = shown.model_copy(update={"standings": shown.standings.model_copy(update={"rows": []})})
    rows = shown.standings.rows
    parts = b",".join(_ROWS.dump_json(rows[i : i + CHUNK])[1:-1] for i in range(0, len(rows), CHUNK))
    body = head.model_dump_json().encode().replace(b'"rows":[]', b'"rows":[' + parts + b"]", 1)
    kept.json[id(shown)] = (shown, body)
    return body


def standings_json(session: Session, row: ContestRow, viewer: Caller | None, live: bool = False) -> bytes:
    """standings() as the API's JSON, computed in this process (the API asks the standings
    process instead: standings_process.py)."""
    return computed_json(session, row, shown_frozen(session, row, viewer, live))


def standings_csv(table: Standings) -> str:
    """One line per contestant: rank, name, total, the tie-breaking figures, the tie rule that
    decided the place, and one column per problem (the breakdown)."""
    figure_names = sorted({k for r in table.rows for k in r.figures})
    problems = sorted({k for r in table.rows for k in r.breakdown})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["rank", "contestant", "total", *figure_names, "tie_break", *problems])
    for r in table.rows:
        writer.writerow(
            [
                r.rank,
                r.contestant,
                f"{r.total:.6g}",
                *(r.figures.get(k, "") for k in figure_names),
                r.tie_break or "",
                *(f"{r.breakdown[p]:.6g}" if p in r.breakdown else "" for p in problems),
            ]
        )
    return out.getvalue()
