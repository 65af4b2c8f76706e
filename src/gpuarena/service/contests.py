"""Contests in the service: creating them, entering submissions, organizer review and
similarity flags. Standings are in contest_standings.py, reading entries is contest_entries.py.

An entry is made in the transaction that queues its submission (the window, the problem, the
device kind, the mode, the team and the daily limit are checked there), and its figures
(interval, errors) are copied in the transaction that accepts the result. Standings are
recomputed on each read: a contest's entries are one indexed query."""

from __future__ import annotations

import datetime as dt
import math
from typing import Literal

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from gpuarena.contests.model import as_utc
from gpuarena.contests.resubmission import flag_resubmissions
from gpuarena.contests.similarity import SimilarPair, Solution, similar_pairs
from gpuarena.contracts.records import Evaluation
from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.errors import GpuarenaError
from gpuarena.harness.stats import weighted_geomean
from gpuarena.service.contest_entries import entry_rows, rule_entries
from gpuarena.service.contest_schemas import ContestInfo, ContestSpec, EntryOut, ReviewRequest, Team
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.tables import (
    ContestEntry,
    ContestOrganizer,
    ContestRow,
    Problem,
    SampleRow,
    SolutionBlob,
    Submission,
    TeamMember,
    User,
    utcnow,
)

Phase = Literal["upcoming", "running", "frozen", "ended"]


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
    return list(
        session.scalars(
            select(User.name)
            .join(ContestOrganizer, ContestOrganizer.user_id == User.id)
            .where(ContestOrganizer.contest_id == contest_id)
            .order_by(User.name)
        )
    )


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
        raise Forbidden(
            f"only the organizers of {row.slug} may do this ({', '.join(organizer_names(session, row.id))})"
        )


def _missing_users(session: Session, names: list[str], what: str) -> str | None:
    """The mistake of naming users that do not exist, or None."""
    found = set(session.scalars(select(User.name).where(User.name.in_(names))))
    missing = [n for n in dict.fromkeys(names) if n not in found]
    if not missing:
        return None
    return (
        f"{what}: no user named {', '.join(map(repr, missing))} "
        "(accounts come first: `gpuarena users add NAME` or an invite)"
    )


def _user_ids(session: Session, names: list[str], what: str) -> dict[str, int]:
    found = dict(session.execute(select(User.name, User.id).where(User.name.in_(names))).all())
    if (mistake := _missing_users(session, names, what)) is not None:
        raise GpuarenaError(mistake)
    return found


def check(session: Session, spec: ContestSpec) -> list[str]:
    """Every mistake of a contest file against what the service knows (the slug in use, unknown
    problems, unknown users), all at once; a device kind no runner has brought yet is not one
    (`device_kinds.runner_warnings` says so instead)."""
    mistakes = []
    if session.scalar(select(ContestRow.id).where(ContestRow.slug == spec.slug)) is not None:
        mistakes.append(f"slug: a contest named {spec.slug!r} exists already; pick another slug")
    known = set(session.scalars(select(Problem.slug).where(Problem.current, Problem.slug.in_(spec.problems))))
    unknown = [p for p in spec.problems if p not in known]
    if unknown:
        mistakes.append(f"problems: unknown problem {', '.join(map(repr, unknown))} (GET /api/problems lists them)")
    for names, what in (
        (spec.organizers, "organizers"),
        ([m for t in spec.teams for m in t.members], "team members"),
    ):
        if (mistake := _missing_users(session, names, what)) is not None:
            mistakes.append(mistake)
    return mistakes


def create(session: Session, who: Caller, spec: ContestSpec) -> ContestRow:
    """A new contest, checked against what the service knows: problems and users (every mistake
    named at once). Its device kinds need no runner yet: the reply warns of those none serves."""
    if not who.is_staff:
        raise Forbidden(f"{who.name} is a {who.role}; creating a contest needs an organiser or admin account")
    mistakes = check(session, spec)
    if mistakes:
        raise GpuarenaError(mistakes[0] if len(mistakes) == 1 else f"{len(mistakes)} mistakes: " + "; ".join(mistakes))
    organizers = _user_ids(session, sorted({who.name, *spec.organizers}), "organizers")
    members = _user_ids(session, [m for t in spec.teams for m in t.members], "team members")
    row = ContestRow(
        slug=spec.slug,
        title=spec.title,
        description=spec.description,
        config=spec.model_dump(mode="json"),
        start=naive(spec.start),
        end=naive(spec.end),
        teams=spec.entries == "team",
        created_by=who.user_id,
    )
    session.add(row)
    session.flush()
    session.add_all(ContestOrganizer(contest_id=row.id, user_id=uid) for uid in organizers.values())
    session.add_all(
        TeamMember(contest_id=row.id, user_id=members[m], team=t.name) for t in spec.teams for m in t.members
    )
    session.flush()
    return row


def set_team(session: Session, row: ContestRow, who: Caller, team: Team) -> None:
    """An organizer adds a team to a team contest, or replaces its members; entries already
    made keep the contestant they were made for."""
    require_organizer(session, row, who)
    if not row.teams:
        raise GpuarenaError(f'{row.slug} takes individual entries; teams belong to a contest with entries = "team"')
    members = _user_ids(session, team.members, "team members")
    elsewhere = session.execute(
        select(User.name, TeamMember.team)
        .join(User, User.id == TeamMember.user_id)
        .where(TeamMember.contest_id == row.id, TeamMember.user_id.in_(members.values()), TeamMember.team != team.name)
    ).all()
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
    count = row.entries_count  # kept by enter(): a count of the entries grew with them
    return ContestInfo(
        spec=spec, phase=phase(spec), organizers=organizer_names(session, row.id), entries_count=count or 0
    )


def listed(session: Session) -> list[ContestInfo]:
    return [info(session, row) for row in session.scalars(select(ContestRow).order_by(ContestRow.start.desc()))]


def contestant_of(session: Session, row: ContestRow, who: Caller) -> str:
    """Who an entry counts for: the user, or their team in a team contest."""
    if not row.teams:
        return who.name
    member = session.get(TeamMember, (row.id, who.user_id))
    if member is None:
        raise Forbidden(
            f"{row.slug} takes team entries and {who.name} is on no team of it; ask an organizer "
            f"({', '.join(organizer_names(session, row.id))})"
        )
    return member.team


def open_for(session: Session, who: Caller | None, problem: str, now: dt.datetime | None = None) -> list[ContestInfo]:
    """The contests `who` may enter a submission to `problem` into now: open (started, not
    ended), with the problem, and (team contests) with `who` on a team. The submit form's
    choices; `enter` checks again (device kind, mode, daily limit) when one is chosen."""
    if who is None or who.role == "runner":
        return []
    now = now or utcnow()
    rows = session.scalars(
        select(ContestRow)
        .where(ContestRow.start <= now, ContestRow.end > now)
        .order_by(ContestRow.end, ContestRow.slug)
    )
    found = []
    for row in rows:
        spec = spec_of(row)
        if problem not in spec.problems:
            continue
        if row.teams and session.get(TeamMember, (row.id, who.user_id)) is None:
            continue
        found.append(ContestInfo(spec=spec, phase=phase(spec, now), organizers=[]))
    return found


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
    if problem == SAMPLES_SLUG and (spec.rule.name != "ccf-dataset" or SAMPLES_SLUG not in spec.problems):
        raise GpuarenaError(
            f"{slug} takes no dataset samples: samples count in a ccf-dataset contest that lists "
            f'"{SAMPLES_SLUG}" among its problems (docs/dataset.md)'
        )
    if problem not in spec.problems:
        raise GpuarenaError(f"{problem} is not a problem of {slug} ({', '.join(spec.problems)})")
    if submission.device_kind not in spec.device_kinds:
        raise GpuarenaError(f"{slug} judges on {', '.join(spec.device_kinds)}, not {submission.device_kind!r}")
    if submission.mode != "ranked":
        raise GpuarenaError(
            f"only ranked runs count in a contest; submit with --mode ranked (this was "
            f"{submission.mode}), or without --contest to try it out"
        )
    contestant = contestant_of(session, row, who)
    if spec.daily_submission_limit:
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        today = session.scalar(
            select(func.count())
            .select_from(ContestEntry)
            .where(
                ContestEntry.contest_id == row.id,
                ContestEntry.contestant == contestant,
                ContestEntry.submitted_at >= day,
            )
        )
        assert today is not None  # count() always gives a row
        if today >= spec.daily_submission_limit:
            raise GpuarenaError(
                f"{contestant} has made {today} submissions to {slug} today (UTC); the limit is "
                f"{spec.daily_submission_limit} a day; it resets at 00:00 UTC"
            )
    entry = ContestEntry(
        submission_id=submission.id,
        contest_id=row.id,
        user_id=who.user_id,
        contestant=contestant,
        submitted_at=now,
        review="pending",
        review_comment="",
        bonus=[],
        merged_upstream=False,
        samples_accepted=0,
        samples_score=0.0,
    )
    session.add(entry)
    session.execute(
        update(ContestRow).where(ContestRow.id == row.id).values(entries_count=ContestRow.entries_count + 1)
    )
    if when == "frozen":  # its result is held until the end (holdback.py)
        submission.held_until = naive(spec.end)
    return entry


def _positive(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) and value > 0 else None


def figures(evaluation: Evaluation) -> dict[str, float | None]:
    """The score's interval and the errors, from the record: the interval's ends are the same
    weighted geometric mean as the score, of each workload's interval end (wider than the
    score's own interval would be: the screening errs toward flagging a resubmission). A
    checked port's record gives the ccf-migration figures instead (migration_figures)."""
    if evaluation.migration is not None:
        return migration_figures(evaluation)
    timed = [(w, w.speedup_ci95) for w in evaluation.workloads if w.speedup_ci95 is not None and w.speedup is not None]
    low = high = None
    if timed and len(timed) == len(evaluation.workloads) and evaluation.score is not None:
        weights = [w.weight for w, _ in timed]
        low = min(evaluation.score, weighted_geomean([ci[0] for _, ci in timed], weights))
        high = max(evaluation.score, weighted_geomean([ci[1] for _, ci in timed], weights))
    abs_errors = [w.max_abs_error for w in evaluation.workloads if w.max_abs_error is not None]
    rel_errors = [w.max_rel_error for w in evaluation.workloads if w.max_rel_error is not None]
    return {
        "score_low": _positive(low),
        "score_high": _positive(high),
        "max_abs_error": max(abs_errors) if abs_errors else None,
        "max_rel_error": max(rel_errors) if rel_errors else None,
    }


def migration_figures(evaluation: Evaluation) -> dict[str, float | None]:
    """A checked port: the judge's score is the report's points (an organizer may still set
    another in review), the completeness the share of golden outputs it matched."""
    report = evaluation.migration or {}
    outputs = report.get("outputs") or []
    points = (report.get("score") or {}).get("total")
    return {
        "judge_score": float(points) if points is not None else None,
        "completeness": sum(bool(o.get("matched")) for o in outputs) / len(outputs) if outputs else None,
    }


def on_result(session: Session, submission: Submission, evaluation: Evaluation) -> None:
    """Copy the figures the rules read onto the submission's contest entry, if it has one."""
    entry = session.get(ContestEntry, submission.id)
    if entry is None:
        return
    for name, value in figures(evaluation).items():
        setattr(entry, name, value)
    entry.updated_at = utcnow()  # the verdict changes what the rules read


def _visible_contestants(session: Session, row: ContestRow, viewer: Caller) -> set[str] | None:
    """None: every entry (organizers); else the viewer's own (and their team's)."""
    if is_organizer(session, row, viewer):
        return None
    if row.teams:
        member = session.get(TeamMember, (row.id, viewer.user_id))
        return {member.team} if member is not None else set()
    return {viewer.name}


def entries(
    session: Session, row: ContestRow, viewer: Caller, review: str | None = None, passed_only: bool = False
) -> list[EntryOut]:
    """Entries with their review and resubmission flag: the organizers see all of them (the
    review queue), a contestant their own, newest first."""
    spec = spec_of(row)
    visible = _visible_contestants(session, row, viewer)
    rows = entry_rows(session, row, contestants=visible)
    # flags compare a contestant's own entries only: those shown are enough
    flags = flag_resubmissions(rule_entries(session, row, visible), spec.resubmission)
    reviewers = dict(
        session.execute(
            select(User.id, User.name).where(User.id.in_({r.reviewer_id for r in rows if r.reviewer_id is not None}))
        ).all()
    )
    out = []
    for r in rows:
        if review is not None and r.review != review:
            continue
        if passed_only and r.status != "PASSED":
            continue
        flag = flags.get(r.submission_id)
        out.append(
            EntryOut(
                submission_id=r.submission_id,
                contestant=r.contestant,
                user=r.user,
                problem=r.problem,
                device_kind=r.device_kind,
                status=r.status,
                score=r.score,
                score_low=r.score_low,
                score_high=r.score_high,
                max_abs_error=r.max_abs_error,
                max_rel_error=r.max_rel_error,
                submitted_at=r.submitted_at,
                review=r.review,
                review_comment=r.review_comment,
                reviewer=reviewers.get(r.reviewer_id),
                merged_upstream=r.merged_upstream,
                bonus=list(r.bonus or []),
                samples_accepted=r.samples_accepted,
                samples_score=r.samples_score,
                judge_score=r.judge_score,
                completeness=r.completeness,
                flagged=bool(flag and flag.flagged),
                flag_reason=(flag.reason or "") if flag else "",
            )
        )
    out.reverse()
    return out


def review(session: Session, row: ContestRow, who: Caller, submission_id: int, request: ReviewRequest) -> ContestEntry:
    """An organizer's decision on one entry; only the figures the request gives change. A
    sample's entry is reviewed as a sample (service/samples.py), which sets its figures."""
    require_organizer(session, row, who)
    entry = session.get(ContestEntry, submission_id)
    if entry is None or entry.contest_id != row.id:
        raise NotFound(f"submission {submission_id} is not an entry of {row.slug}")
    if session.get(SampleRow, submission_id) is not None:
        raise GpuarenaError(
            f"submission {submission_id} is a dataset sample: review it as one (`gpuarena sample "
            f"review {submission_id}`, POST /api/samples/{submission_id}/review or /samples), which "
            "counts it for the contest"
        )
    status = session.scalar(select(Submission.status).where(Submission.id == submission_id))
    if request.decision == "accepted" and status != "PASSED":
        raise GpuarenaError(f"submission {submission_id} is {status}: only a run that passed can be accepted")
    return record_review(session, entry, who, request)


def record_review(session: Session, entry: ContestEntry, who: Caller, request: ReviewRequest) -> ContestEntry:
    """Write a review onto an entry (its decider checked who may make it and on what)."""
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
    query = (
        select(ContestEntry.submission_id, ContestEntry.contestant, Problem.slug, Submission.solution_hash)
        .join(Submission, Submission.id == ContestEntry.submission_id)
        .join(Problem, Problem.id == Submission.problem_id)
        .where(ContestEntry.contest_id == row.id, Submission.status == "PASSED", ContestEntry.review != "rejected")
        .order_by(ContestEntry.submission_id)
    )
    for sid, contestant, problem, solution_hash in session.execute(query):
        latest[(contestant, problem)] = (sid, solution_hash)
    hashes = {h for _, h in latest.values()}
    sources: dict[str, dict[str, str]] = dict(
        session.execute(select(SolutionBlob.hash, SolutionBlob.sources).where(SolutionBlob.hash.in_(hashes))).all()
    )
    solutions = [
        Solution(submission_id=sid, contestant=contestant, problem=problem, files=sources[h])
        for (contestant, problem), (sid, h) in latest.items()
        if sources.get(h)
    ]
    return similar_pairs(solutions, threshold)
