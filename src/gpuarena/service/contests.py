"""Contests in the service: creating them, entering submissions, organizer review, and
standings computed by the pure rules in `gpuarena.contests` from the entries kept here.

An entry is made in the transaction that queues its submission (the window, the problem, the
device kind, the mode, the team and the daily limit are checked there), and its figures
(interval, errors) are copied in the transaction that accepts the result. Standings are
recomputed on each read: a contest's entries are one indexed query."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import sys
import threading
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import Row, Text, delete, func, select, type_coerce
from sqlalchemy.orm import Session

from gpuarena.contests import rules as contest_rules
from gpuarena.contests.eligibility import board_key, counted
from gpuarena.contests.model import Entry, Standings, as_utc
from gpuarena.contests.resubmission import flag_resubmissions
from gpuarena.contests.similarity import SimilarPair, Solution, similar_pairs
from gpuarena.errors import GpuarenaError
from gpuarena.harness.records import Evaluation
from gpuarena.harness.stats import weighted_geomean
from gpuarena.service.contest_schemas import (ContestInfo, ContestSpec, EntryOut, ProblemBest, ReviewRequest,
                                              StandingsOut, Team)
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.tables import (ContestEntry, ContestOrganizer, ContestRow, DeviceKind, Problem, SolutionBlob,
                                     Submission, TeamMember, User, utcnow)

Phase = Literal["upcoming", "running", "frozen", "ended"]
REVIEWED = {"accepted": True, "rejected": False}
"""A review as Entry.accepted_by_organizer reads it (pending: None)."""
SCREEN_BY_DEFAULT = {"fastest": contest_rules.fastest.SCREEN_BY_DEFAULT,
                     "fast_p": contest_rules.fast_p.SCREEN_BY_DEFAULT,
                     "ccf-kernel": contest_rules.ccf_kernel.SCREEN_BY_DEFAULT,
                     "ccf-dataset": contest_rules.ccf_dataset.SCREEN_BY_DEFAULT,
                     "ccf-migration": contest_rules.ccf_migration.SCREEN_BY_DEFAULT}


def naive(value: dt.datetime) -> dt.datetime:
    """The tables keep naive UTC."""
    return as_utc(value).replace(tzinfo=None)


def spec_of(row: ContestRow) -> ContestSpec:
    return ContestSpec.model_validate(row.config)


def phase(spec: ContestSpec, now: dt.datetime | None = None) -> Phase:
    now = as_utc(now or utcnow())
    if now < spec.start:
        return "upcoming"
    if now >= spec.end:
        return "ended"
    return "frozen" if spec.freeze_hours and now >= spec.freeze_at else "running"


def get(session: Session, slug: str) -> ContestRow:
    row = session.scalar(select(ContestRow).where(ContestRow.slug == slug))
    if row is None:
        raise NotFound(f"no contest {slug!r} (GET /api/contests lists them)")
    return row


def organizer_names(session: Session, contest_id: int) -> list[str]:
    return list(session.scalars(select(User.name).join(ContestOrganizer, ContestOrganizer.user_id == User.id)
                                .where(ContestOrganizer.contest_id == contest_id).order_by(User.name)))


def is_organizer(session: Session, row: ContestRow, who: Caller | None) -> bool:
    """Admins, and the users the contest names as organizers (an organiser account of another
    contest is not one of this contest's)."""
    if who is None:
        return False
    if who.role == "admin":
        return True
    return session.get(ContestOrganizer, (row.id, who.user_id)) is not None


def require_organizer(session: Session, row: ContestRow, who: Caller) -> None:
    if not is_organizer(session, row, who):
        raise Forbidden(f"only the organizers of {row.slug} may do this ({', '.join(organizer_names(session, row.id))})")


def _user_ids(session: Session, names: list[str], what: str) -> dict[str, int]:
    found = dict(session.execute(select(User.name, User.id).where(User.name.in_(names))).all())
    missing = [n for n in names if n not in found]
    if missing:
        raise GpuarenaError(f"{what}: no user named {', '.join(map(repr, missing))} "
                            "(accounts come first: `gpuarena users add NAME` or an invite)")
    return found


def create(session: Session, who: Caller, spec: ContestSpec) -> ContestRow:
    """A new contest, checked against what the service knows: problems, device kinds, users."""
    if not who.is_staff:
        raise Forbidden(f"{who.name} is a {who.role}; creating a contest needs an organiser or admin account")
    if session.scalar(select(ContestRow.id).where(ContestRow.slug == spec.slug)) is not None:
        raise GpuarenaError(f"a contest named {spec.slug!r} exists already; pick another slug")
    known = set(session.scalars(select(Problem.slug).where(Problem.current, Problem.slug.in_(spec.problems))))
    unknown = [p for p in spec.problems if p not in known]
    if unknown:
        raise GpuarenaError(f"unknown problem {', '.join(map(repr, unknown))} (GET /api/problems lists them)")
    kinds = set(session.scalars(select(DeviceKind.name)))
    missing = [k for k in spec.device_kinds if k not in kinds]
    if missing:
        raise GpuarenaError(f"no runner has brought device kind {', '.join(map(repr, missing))} (known: "
                            f"{', '.join(sorted(kinds)) or 'none yet'}); connect a runner with that device first")
    organizers = _user_ids(session, sorted({who.name, *spec.organizers}), "organizers")
    members = _user_ids(session, [m for t in spec.teams for m in t.members], "team members")
    row = ContestRow(slug=spec.slug, title=spec.title, description=spec.description,
                     config=spec.model_dump(mode="json"), start=naive(spec.start), end=naive(spec.end),
                     teams=spec.entries == "team", created_by=who.user_id)
    session.add(row)
    session.flush()
    session.add_all(ContestOrganizer(contest_id=row.id, user_id=uid) for uid in organizers.values())
    session.add_all(TeamMember(contest_id=row.id, user_id=members[m], team=t.name)
                    for t in spec.teams for m in t.members)
    session.flush()
    return row


def set_team(session: Session, row: ContestRow, who: Caller, team: Team) -> None:
    """An organizer adds a team to a team contest, or replaces its members; entries already
    made keep the contestant they were made for."""
    require_organizer(session, row, who)
    if not row.teams:
        raise GpuarenaError(f"{row.slug} takes individual entries; teams belong to a contest with entries = \"team\"")
    members = _user_ids(session, team.members, "team members")
    elsewhere = session.execute(select(User.name, TeamMember.team).join(User, User.id == TeamMember.user_id).where(
        TeamMember.contest_id == row.id, TeamMember.user_id.in_(members.values()), TeamMember.team != team.name)).all()
    if elsewhere:
        raise GpuarenaError("a user can be on one team only: " + ", ".join(f"{u} is on {t}" for u, t in elsewhere))
    session.execute(delete(TeamMember).where(TeamMember.contest_id == row.id, TeamMember.team == team.name))
    session.add_all(TeamMember(contest_id=row.id, user_id=uid, team=team.name) for uid in members.values())
    spec = spec_of(row)
    teams = [t for t in spec.teams if t.name != team.name] + [team]
    row.config = spec.model_copy(update={"teams": teams}).model_dump(mode="json")
    session.flush()


def info(session: Session, row: ContestRow) -> ContestInfo:
    spec = spec_of(row)
    count = session.scalar(select(func.count()).select_from(ContestEntry).where(ContestEntry.contest_id == row.id))
    return ContestInfo(spec=spec, phase=phase(spec), organizers=organizer_names(session, row.id),
                       entries_count=count or 0)


def listed(session: Session) -> list[ContestInfo]:
    return [info(session, row) for row in session.scalars(select(ContestRow).order_by(ContestRow.start.desc()))]


def contestant_of(session: Session, row: ContestRow, who: Caller) -> str:
    """Who an entry counts for: the user, or their team in a team contest."""
    if not row.teams:
        return who.name
    member = session.get(TeamMember, (row.id, who.user_id))
    if member is None:
        raise Forbidden(f"{row.slug} takes team entries and {who.name} is on no team of it; ask an organizer "
                        f"({', '.join(organizer_names(session, row.id))})")
    return member.team


def enter(session: Session, who: Caller, slug: str, submission: Submission, problem: str) -> ContestEntry:
    """Enter a just-queued submission into a contest, or refuse it (the caller's transaction
    rolls back, so nothing of the submission is kept)."""
    row = get(session, slug)
    spec = spec_of(row)
    now = submission.created_at or utcnow()
    when = phase(spec, now)
    if when == "upcoming":
        raise GpuarenaError(f"{slug} has not started: it opens {spec.start:%Y-%m-%d %H:%M} UTC")
    if when == "ended":
        raise GpuarenaError(f"{slug} ended {spec.end:%Y-%m-%d %H:%M} UTC: submissions no longer count")
    if problem not in spec.problems:
        raise GpuarenaError(f"{problem} is not a problem of {slug} ({', '.join(spec.problems)})")
    if submission.device_kind not in spec.device_kinds:
        raise GpuarenaError(f"{slug} judges on {', '.join(spec.device_kinds)}, not {submission.device_kind!r}")
    if submission.mode != "ranked":
        raise GpuarenaError(f"only ranked runs count in a contest; submit with --mode ranked (this was "
                            f"{submission.mode}), or without --contest to try it out")
    contestant = contestant_of(session, row, who)
    if spec.daily_submission_limit:
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        today = session.scalar(select(func.count()).select_from(ContestEntry).where(
            ContestEntry.contest_id == row.id, ContestEntry.contestant == contestant,
            ContestEntry.submitted_at >= day))
        if today >= spec.daily_submission_limit:
            raise GpuarenaError(f"{contestant} has made {today} submissions to {slug} today (UTC); the limit is "
                                f"{spec.daily_submission_limit} a day; it resets at 00:00 UTC")
    entry = ContestEntry(submission_id=submission.id, contest_id=row.id, user_id=who.user_id,
                         contestant=contestant, submitted_at=now, review="pending", review_comment="", bonus=[],
                         merged_upstream=False, samples_accepted=0, samples_score=0.0)
    session.add(entry)
    return entry


def _positive(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value > 0 else None


def figures(evaluation: Evaluation) -> dict[str, float | None]:
    """The score's interval and the errors, from the record: the interval's ends are the same
    weighted geometric mean as the score, of each workload's interval end (wider than the
    score's own interval would be: the screening errs toward flagging a resubmission)."""
    timed = [w for w in evaluation.workloads if w.speedup_ci95 is not None and w.speedup is not None]
    low = high = None
    if timed and len(timed) == len(evaluation.workloads) and evaluation.score is not None:
        weights = [w.weight for w in timed]
        low = min(evaluation.score, weighted_geomean([w.speedup_ci95[0] for w in timed], weights))
        high = max(evaluation.score, weighted_geomean([w.speedup_ci95[1] for w in timed], weights))
    abs_errors = [w.max_abs_error for w in evaluation.workloads if w.max_abs_error is not None]
    rel_errors = [w.max_rel_error for w in evaluation.workloads if w.max_rel_error is not None]
    return {"score_low": _positive(low), "score_high": _positive(high),
            "max_abs_error": max(abs_errors) if abs_errors else None,
            "max_rel_error": max(rel_errors) if rel_errors else None}


def on_result(session: Session, submission: Submission, evaluation: Evaluation) -> None:
    """Copy the figures the rules read onto the submission's contest entry, if it has one."""
    entry = session.get(ContestEntry, submission.id)
    if entry is None:
        return
    for name, value in figures(evaluation).items():
        setattr(entry, name, value)
    entry.updated_at = utcnow()  # the verdict changes what the rules read


_RULE_COLUMNS = (ContestEntry.submission_id, ContestEntry.contestant, Problem.slug, Problem.level,
                 Submission.device_kind, Submission.status, Submission.mode, Submission.score, ContestEntry.score_low,
                 ContestEntry.score_high, ContestEntry.max_abs_error, ContestEntry.max_rel_error,
                 type_coerce(ContestEntry.submitted_at, Text), ContestEntry.review, ContestEntry.merged_upstream,
                 type_coerce(ContestEntry.bonus, Text), ContestEntry.samples_accepted, ContestEntry.samples_score,
                 ContestEntry.judge_score, ContestEntry.completeness)
"""What the rules read, in _as_entry's order. Bonus as its JSON text (decoded only where not
empty; PostgreSQL's driver decodes it anyway) and the time as SQLite's text (parsed by datetime.fromisoformat, ten times faster than
the column type's own parser; PostgreSQL's driver gives a datetime either way)."""


def _joined(query):  # type: ignore[no-untyped-def]
    return (query.join(Submission, Submission.id == ContestEntry.submission_id)
            .join(Problem, Problem.id == Submission.problem_id))


_RULE_ROWS = _joined(select(*_RULE_COLUMNS))
_RULE_ROWS_STAMPED = _joined(select(*_RULE_COLUMNS, type_coerce(ContestEntry.updated_at, Text)))
_ENTRY_ROWS = _joined(select(*ContestEntry.__table__.columns, Submission.status, Submission.mode, Submission.score,
                             Submission.device_kind, Problem.slug.label("problem"), Problem.level,
                             User.name.label("user"))).join(User, User.id == ContestEntry.user_id)


def _rows(session: Session, row: ContestRow, query=_ENTRY_ROWS,  # type: ignore[no-untyped-def]
          contestants: set[str] | None = None) -> list[Row]:
    """Plain rows, not ORM objects: loading a large contest's entries as objects costs a
    hundred times more than the rule that reads them (bench/contest_standings_service.py).
    With contestants, only theirs."""
    query = query.where(ContestEntry.contest_id == row.id)
    if contestants is not None:
        query = query.where(ContestEntry.contestant.in_(sorted(contestants)))
    return list(session.connection().execute(query.order_by(ContestEntry.submission_id)).all())


def _as_time(value: str | dt.datetime) -> dt.datetime:
    """A naive UTC time as SQLite's text or PostgreSQL's datetime."""
    return value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(value)


def _as_list(value: str | list | None) -> list:
    """Bonus items as SQLite's JSON text (decoded only where not empty) or PostgreSQL's list
    (its driver decodes JSON itself)."""
    if isinstance(value, list):
        return value
    return json.loads(value) if value and value != "[]" else []


def _as_entry(r: tuple) -> Entry:
    """A row of _RULE_COLUMNS as the rules read it, built without validation (Entry.trusted):
    every field was checked on its way into the tables (the review request, the runner's
    record). Names are interned, as Entry's validator would."""
    (sid, contestant, problem, level, kind, status, mode, score, low, high, abs_error, rel_error, at, review, merged,
     bonus, samples, samples_score, judge, completeness) = r
    passed = status == "PASSED"
    return Entry.trusted(dict(
        submission_id=sid, contestant=sys.intern(contestant), problem=sys.intern(problem), level=level,
        device_kind=sys.intern(kind), status=sys.intern(status), mode=mode, score=score if passed else None,
        score_low=low if passed else None, score_high=high if passed else None, max_abs_error=abs_error,
        max_rel_error=rel_error, submitted_at=_as_time(at).replace(tzinfo=dt.UTC),
        accepted_by_organizer=REVIEWED.get(review), merged_upstream=bool(merged),
        bonus=_as_list(bonus), samples_accepted=samples,
        samples_score=samples_score, judge_score=judge, completeness=completeness))


def rule_entries(session: Session, row: ContestRow, contestants: set[str] | None = None) -> list[Entry]:
    """The contest's entries (or those of some contestants), as the scoring rules read them."""
    return [_as_entry(r) for r in _rows(session, row, _RULE_ROWS, contestants)]


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
            self.entries[sid], self.updated[sid] = _as_entry(r[:-1]), stamp
            when = _as_time(stamp)
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
    query = _RULE_ROWS_STAMPED.where(ContestEntry.contest_id == row.id)
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


def _visible_contestants(session: Session, row: ContestRow, viewer: Caller) -> set[str] | None:
    """None: every entry (organizers); else the viewer's own (and their team's)."""
    if is_organizer(session, row, viewer):
        return None
    if row.teams:
        member = session.get(TeamMember, (row.id, viewer.user_id))
        return {member.team} if member is not None else set()
    return {viewer.name}


def entries(session: Session, row: ContestRow, viewer: Caller, review: str | None = None,
            passed_only: bool = False) -> list[EntryOut]:
    """Entries with their review and resubmission flag: the organizers see all of them (the
    review queue), a contestant their own, newest first."""
    spec = spec_of(row)
    visible = _visible_contestants(session, row, viewer)
    rows = _rows(session, row, contestants=visible)
    # flags compare a contestant's own entries only: those shown are enough
    flags = flag_resubmissions(rule_entries(session, row, visible), spec.resubmission)
    reviewers = dict(session.execute(select(User.id, User.name).where(
        User.id.in_({r.reviewer_id for r in rows if r.reviewer_id is not None}))).all())
    out = []
    for r in rows:
        if review is not None and r.review != review:
            continue
        if passed_only and r.status != "PASSED":
            continue
        flag = flags.get(r.submission_id)
        out.append(EntryOut(submission_id=r.submission_id, contestant=r.contestant, user=r.user, problem=r.problem,
                            device_kind=r.device_kind, status=r.status, score=r.score, score_low=r.score_low,
                            score_high=r.score_high, max_abs_error=r.max_abs_error, max_rel_error=r.max_rel_error,
                            submitted_at=r.submitted_at, review=r.review, review_comment=r.review_comment,
                            reviewer=reviewers.get(r.reviewer_id), merged_upstream=r.merged_upstream,
                            bonus=list(r.bonus or []), samples_accepted=r.samples_accepted,
                            samples_score=r.samples_score, judge_score=r.judge_score, completeness=r.completeness,
                            flagged=bool(flag and flag.flagged), flag_reason=(flag.reason or "") if flag else ""))
    out.reverse()
    return out


def review(session: Session, row: ContestRow, who: Caller, submission_id: int, request: ReviewRequest) -> ContestEntry:
    """An organizer's decision on one entry; only the figures the request gives change."""
    require_organizer(session, row, who)
    entry = session.get(ContestEntry, submission_id)
    if entry is None or entry.contest_id != row.id:
        raise NotFound(f"submission {submission_id} is not an entry of {row.slug}")
    status = session.scalar(select(Submission.status).where(Submission.id == submission_id))
    if request.decision == "accepted" and status != "PASSED":
        raise GpuarenaError(f"submission {submission_id} is {status}: only a run that passed can be accepted")
    entry.review, entry.review_comment = request.decision, request.comment
    entry.reviewer_id, entry.reviewed_at = who.user_id, utcnow()
    entry.updated_at = entry.reviewed_at
    for name in ("merged_upstream", "bonus", "samples_accepted", "samples_score", "judge_score", "completeness"):
        value = getattr(request, name)
        if value is not None:
            setattr(entry, name, list(value) if name == "bonus" else value)
    session.flush()
    return entry


def similar(session: Session, row: ContestRow, who: Caller, threshold: float) -> list[SimilarPair]:
    """Pairs of different contestants' passing, not rejected entries whose code is alike
    (each contestant's latest such entry per problem). A flag for the organizers only."""
    require_organizer(session, row, who)
    latest: dict[tuple[str, str], tuple[int, str]] = {}
    query = (select(ContestEntry.submission_id, ContestEntry.contestant, Problem.slug, Submission.solution_hash)
             .join(Submission, Submission.id == ContestEntry.submission_id)
             .join(Problem, Problem.id == Submission.problem_id)
             .where(ContestEntry.contest_id == row.id, Submission.status == "PASSED",
                    ContestEntry.review != "rejected").order_by(ContestEntry.submission_id))
    for sid, contestant, problem, solution_hash in session.execute(query):
        latest[(contestant, problem)] = (sid, solution_hash)
    hashes = {h for _, h in latest.values()}
    sources = dict(session.execute(select(SolutionBlob.hash, SolutionBlob.sources)
                                   .where(SolutionBlob.hash.in_(hashes))).all())
    solutions = [Solution(submission_id=sid, contestant=contestant, problem=problem, files=sources[h])
                 for (contestant, problem), (sid, h) in latest.items() if sources.get(h)]
    return similar_pairs(solutions, threshold)
