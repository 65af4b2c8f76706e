"""A contest's standings in the service: computed by the contest's rule from its entries, kept
per server process and brought up to date from the entries changed since the last read."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import threading
from dataclasses import dataclass, field

from sqlalchemy import Row
from sqlalchemy.orm import Session

from gpuarena.contests import rules as contest_rules
from gpuarena.contests.eligibility import board_key, counted
from gpuarena.contests.model import Entry, Standings
from gpuarena.service.contest_entries import RULE_ROWS_STAMPED, as_entry, as_time
from gpuarena.service.contest_schemas import ContestSpec, ProblemBest, StandingsOut
from gpuarena.service.contests import is_organizer, phase, spec_of
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden
from gpuarena.service.tables import ContestEntry, ContestRow, utcnow

SCREEN_BY_DEFAULT = {"fastest": contest_rules.fastest.SCREEN_BY_DEFAULT,
                     "fast_p": contest_rules.fast_p.SCREEN_BY_DEFAULT,
                     "ccf-kernel": contest_rules.ccf_kernel.SCREEN_BY_DEFAULT,
                     "ccf-dataset": contest_rules.ccf_dataset.SCREEN_BY_DEFAULT,
                     "ccf-migration": contest_rules.ccf_migration.SCREEN_BY_DEFAULT}


def _per_problem_best(spec: ContestSpec, entries: list[Entry]) -> list[ProblemBest]:
    best: dict[str, Entry] = {}
    for e in counted(spec.scoring(), entries, screen_by_default=SCREEN_BY_DEFAULT[spec.rule.name]):
        if not e.passed or e.accepted_by_organizer is False:
            continue
        key = board_key(e.problem, e.device_kind)
        held = best.get(key)
        if held is None or (e.score, -e.submitted_at.timestamp()) > (held.score, -held.submitted_at.timestamp()):
            best[key] = e
    out = []
    for p in spec.problems:
        for d in spec.device_kinds:
            e = best.get(board_key(p, d))
            out.append(ProblemBest(problem=p, device_kind=d, contestant=e.contestant if e else None,
                                   score=e.score if e else None, submission_id=e.submission_id if e else None))
    return out


LAG = dt.timedelta(minutes=1)
"""How far back before the newest change seen the kept entries are checked again: a write is
stamped when made and seen when committed, so a slow transaction can land after a newer one."""


@dataclass
class _Kept:
    """A contest's entries as the rules read them, kept in this process and brought up to date
    on each read with the entries changed since (contest_entries.updated_at, indexed), so that
    a result or a review costs the rule's run, not a reread of every entry."""

    config: str
    entries: dict[int, Entry] = field(default_factory=dict)
    updated: dict[int, str] = field(default_factory=dict)
    """Submission id -> the updated_at applied (as stored)."""
    seen: dt.datetime | None = None
    in_order: bool = True
    shown: dict[bool, StandingsOut] = field(default_factory=dict)
    """Standings computed from these entries, by frozen view; cleared when an entry changes."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, rows: list[Row]) -> bool:
        changed = False
        for r in rows:
            sid, stamp = r[0], r[-1]
            if self.updated.get(sid) == stamp:
                continue
            if self.entries and sid not in self.entries and sid < next(reversed(self.entries)):
                self.in_order = False
            self.entries[sid], self.updated[sid] = as_entry(r[:-1]), stamp
            when = as_time(stamp)
            self.seen = when if self.seen is None or when > self.seen else self.seen
            changed = True
        if changed:
            self.shown.clear()
        return changed

    def in_submission_order(self) -> list[Entry]:
        if not self.in_order:
            self.entries = dict(sorted(self.entries.items()))
            self.in_order = True
        return list(self.entries.values())


_kept: dict[tuple[str, int], _Kept] = {}
_kept_lock = threading.Lock()


def _kept_entries(session: Session, row: ContestRow) -> _Kept:
    """The contest's kept entries, up to date (the caller holds kept.lock)."""
    config = json.dumps(row.config, sort_keys=True)
    key = (str(session.get_bind().url), row.id)
    with _kept_lock:
        kept = _kept.get(key)
        if kept is None or kept.config != config:
            kept = _kept[key] = _Kept(config=config)
    return kept


def _refresh(session: Session, row: ContestRow, kept: _Kept) -> None:
    query = RULE_ROWS_STAMPED.where(ContestEntry.contest_id == row.id)
    if kept.seen is not None:
        query = query.where(ContestEntry.updated_at >= kept.seen - LAG)
    kept.apply(list(session.connection().execute(query.order_by(ContestEntry.submission_id)).all()))


def standings(session: Session, row: ContestRow, viewer: Caller | None, live: bool = False) -> StandingsOut:
    """The standings a viewer may see: during a freeze the public ones count only entries
    submitted before freeze_at; the contest's organizers may ask for the live ones. Computed
    from the kept entries (_Kept) and kept until an entry changes."""
    spec = spec_of(row)
    frozen = phase(spec) == "frozen"
    if live and frozen and not is_organizer(session, row, viewer):
        raise Forbidden(f"the standings of {row.slug} are frozen; only its organizers see the live ones")
    shown_frozen = frozen and not live
    kept = _kept_entries(session, row)
    with kept.lock:
        _refresh(session, row, kept)
        shown = kept.shown.get(shown_frozen)
        if shown is None:
            entries = kept.in_submission_order()
            if shown_frozen:
                entries = [e for e in entries if e.submitted_at < spec.freeze_at]
            table = contest_rules.standings(spec.scoring(), entries)
            shown = kept.shown[shown_frozen] = StandingsOut(
                standings=table, frozen=shown_frozen, live=not shown_frozen, computed_at=utcnow(),
                per_problem_best=_per_problem_best(spec, entries))
    return shown


def standings_csv(table: Standings) -> str:
    """One line per contestant: rank, name, total, the tie-breaking figures, the tie rule that
    decided the place, and one column per problem (the breakdown)."""
    figure_names = sorted({k for r in table.rows for k in r.figures})
    problems = sorted({k for r in table.rows for k in r.breakdown})
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["rank", "contestant", "total", *figure_names, "tie_break", *problems])
    for r in table.rows:
        writer.writerow([r.rank, r.contestant, f"{r.total:.6g}", *(r.figures.get(k, "") for k in figure_names),
                         r.tie_break or "", *(f"{r.breakdown[p]:.6g}" if p in r.breakdown else "" for p in problems)])
    return out.getvalue()
