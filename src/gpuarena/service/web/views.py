"""What each page shows, read from the database into plain values (no ORM objects reach a
template, so rendering never touches a closed session)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpuarena.contracts.device import device_type
from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.harness.profile import roofline
from gpuarena.migration.target import is_app, reference_app_toml
from gpuarena.problems.model import TimeLimits
from gpuarena.service import holdback, leaderboard
from gpuarena.service.catalog import current_problem
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller
from gpuarena.service.rights import manages_problem, sees_private
from gpuarena.service.routes import RUNNER_ONLINE, device_kinds, health, token_info
from gpuarena.service.schemas import DeviceKindInfo, Health, SubmissionDetail, SubmissionOut, TokenInfo
from gpuarena.service.submissions import detail as submission_detail
from gpuarena.service.submissions import search
from gpuarena.service.tables import (
    DeviceKind,
    HeldBest,
    Job,
    LeaderboardEntry,
    Problem,
    Result,
    Runner,
    SolutionBlob,
    Submission,
    Token,
    User,
    utcnow,
)


class PageNotFound(Exception):
    """Nothing at this address (HTTP 404); the message says what was looked for."""


@dataclass
class Home:
    levels: dict[int, list[dict[str, Any]]]
    kinds: list[DeviceKindInfo]
    health: Health
    leaders: list[dict[str, Any]] = field(default_factory=list)
    """The best entry of every problem's leaderboard on each device kind."""
    recent: list[SubmissionOut] = field(default_factory=list)
    """The newest submissions."""


def home(db: Database, who: Caller | None = None) -> Home:
    leaderboard.release_due(db)
    levels: dict[int, list[dict[str, Any]]] = {}
    with db.read() as session:
        for p in session.scalars(
            select(Problem).where(Problem.current, Problem.slug != SAMPLES_SLUG).order_by(Problem.level, Problem.slug)
        ):
            levels.setdefault(p.level, []).append(
                dict(slug=p.slug, name=p.name, summary=p.summary, tags=p.spec.get("tags", []), weight=p.weight)
            )
        scope = holdback.scope(session, who)
        leaders: dict[tuple[str, str], dict[str, Any]] = {}
        entries = session.execute(
            select(
                Problem.slug,
                LeaderboardEntry.device_kind,
                User.name,
                LeaderboardEntry.score,
                LeaderboardEntry.submission_id,
            )
            .join(Problem, Problem.id == LeaderboardEntry.problem_id)
            .join(User, User.id == LeaderboardEntry.user_id)
            .where(Problem.current)
            .order_by(LeaderboardEntry.score.desc())
            .limit(LEADER_ROWS)
        ).all()
        slugs = dict(session.execute(select(Problem.id, Problem.slug).where(Problem.current)).all())
        held = [
            (slugs[r.problem_id], r.device_kind, r.name, r.score, r.submission_id)
            for r in leaderboard.held_bests(session, scope, utcnow(), HeldBest.problem_id.in_(list(slugs)))
        ]
        for slug, kind, user, score, submission_id in sorted([*entries, *held], key=lambda r: -r[3]):
            leaders.setdefault(
                (slug, kind), dict(problem=slug, device_kind=kind, user=user, score=score, submission_id=submission_id)
            )
        recent = search(session, limit=10, viewer=who)
    return Home(
        levels=levels,
        kinds=device_kinds(db),
        health=health(db),
        leaders=sorted(leaders.values(), key=lambda r: (r["problem"], r["device_kind"])),
        recent=recent,
    )


LEADER_ROWS = 20_000
"""Leaderboard entries read for the home page's leaders (the best per problem and kind)."""


score_interval = leaderboard.score_interval


@dataclass
class BoardRow:
    rank: int
    user: str
    score: float
    interval: tuple[float, float] | None
    submission_id: int
    achieved_at: dt.datetime
    tied: bool = False
    """Within noise of the entry above: the two 95% intervals overlap."""


@dataclass
class BestPoint:
    at: dt.datetime
    score: float
    user: str
    submission_id: int


@dataclass
class ProblemPage:
    id: int
    slug: str
    name: str
    level: int
    version: int
    weight: float
    summary: str
    tags: list[str]
    provenance: dict[str, Any]
    workloads: list[dict[str, Any]]
    time_limits: dict[str, float]
    """Seconds per mode (problem.toml's [time_limits], or the defaults for problems stored before)."""
    readme: str
    reference: str
    solutions_public: bool
    owner_id: int | None
    owner: str | None
    kinds: list[str]
    """Device kinds this problem can run on, for the leaderboards and the submit form."""
    boards: dict[str, list[BoardRow]] = field(default_factory=dict)
    history: dict[str, list[BestPoint]] = field(default_factory=dict)


def _runnable_kinds(session: Session, p: Problem) -> list[str]:
    """The kinds with runners that can run the problem (a migration target: any)."""
    devices = (
        {"cpu", "cuda"}
        if is_app(p.spec)
        else {d for w in p.spec["workloads"] for d in w.get("devices", ["cpu", "cuda"])}
    )
    return [k for k in session.scalars(select(DeviceKind.name).order_by(DeviceKind.name)) if device_type(k) in devices]


def board(
    session: Session, problem_id: int, kind: str, limit: int = 100, who: holdback.Scope = holdback.ANONYMOUS
) -> list[BoardRow]:
    """A leaderboard's rows with their intervals (kept with each row), each marked tied when it
    overlaps the one above; with the held bests `who` may see."""
    board = [
        BoardRow(
            rank=r.rank,
            user=r.user,
            score=r.score,
            interval=r.interval,
            submission_id=r.submission_id,
            achieved_at=r.achieved_at,
        )
        for r in leaderboard.read(session, problem_id, kind, limit, who)
    ]
    for above, row in zip(board, board[1:]):
        row.tied = overlapping(above.interval, row.interval)
    return board


def overlapping(a: tuple[float, float] | None, b: tuple[float, float] | None) -> bool:
    """Whether two 95% intervals overlap: then the entries' order is within noise."""
    return a is not None and b is not None and a[0] <= b[1] and b[0] <= a[1]


def _history(session: Session, problem_id: int, kind: str, who: holdback.Scope) -> list[BestPoint]:
    """Each moment the best ranked score on this device kind went up (kept rows: leaderboard.history)."""
    return [
        BestPoint(at=p.at, score=p.score, user=p.user, submission_id=p.submission_id)
        for p in leaderboard.history(session, problem_id, kind, who)
    ]


def _reference_text(p: Problem) -> str:
    """reference.py; for a migration target, the reference app.toml ports are held to (its
    files are stored base64-encoded)."""
    if is_app(p.spec):
        return reference_app_toml(p.files)
    return p.files.get("reference.py", "")


def problem_page(db: Database, slug: str, who: Caller | None = None) -> ProblemPage:
    """The problem, its leaderboards and their history: bounded, indexed reads of kept rows
    (leaderboard.py), whatever the number of stored submissions; a result held by a contest's
    freeze shows to `who` only where they may see it (holdback.py)."""
    leaderboard.release_due(db)
    with db.read() as session:
        scope = holdback.scope(session, who)
        p = current_problem(session, slug)
        if p is None:
            raise PageNotFound(f"there is no problem {slug!r}; the home page lists them")
        owner = session.get(User, p.owner_id) if p.owner_id is not None else None
        spec = p.spec
        page = ProblemPage(
            id=p.id,
            slug=p.slug,
            name=p.name,
            level=p.level,
            version=p.version,
            weight=p.weight,
            summary=p.summary,
            tags=spec.get("tags", []),
            provenance=spec.get("provenance") or {},
            workloads=spec["workloads"],
            time_limits=TimeLimits.model_validate(spec.get("time_limits") or {}).model_dump(),
            readme="" if is_app(spec) else p.files.get("README.md", ""),
            reference=_reference_text(p),
            solutions_public=p.solutions_public,
            owner_id=p.owner_id,
            owner=owner.name if owner else None,
            kinds=_runnable_kinds(session, p),
        )
        kinds = sorted(
            set(page.kinds)
            | set(
                session.scalars(
                    select(LeaderboardEntry.device_kind).where(LeaderboardEntry.problem_id == p.id).distinct()
                )
            )
        )
        for kind in kinds:
            page.boards[kind] = board(session, p.id, kind, who=scope)
            page.history[kind] = _history(session, p.id, kind, scope)
    return page


def may_manage(db: Database, who: Caller | None, slug: str) -> bool:
    """Who may make a problem's solutions public: admins and its owner (rights.manages_problem)."""
    with db.read() as session:
        if current_problem(session, slug) is None:
            raise PageNotFound(f"there is no problem {slug!r}")
        return manages_problem(session, who, slug)


@dataclass
class SubmissionPage:
    detail: SubmissionDetail
    author_id: int
    code: dict[str, str] | None
    """None when this viewer may not read the code."""
    language: str
    score_interval: tuple[float, float] | None
    compared: dict[str, dict[str, Any]] = field(default_factory=dict)
    """'your best' and 'leader': the leaderboard submission each is, and its speed-up per
    workload (absent when it is this submission, or there is none)."""
    roofline: Markup | None = None
    """Profile mode: the roofline plot of the record's profile (SVG drawn by harness/profile/roofline.py)."""


def _compare(session: Session, s: Submission) -> dict[str, dict[str, Any]]:
    """The author's best ranked entry and the leader's, on this problem and device kind, with
    their speed-ups per workload, to show beside this submission's."""
    same = (LeaderboardEntry.problem_id == s.problem_id, LeaderboardEntry.device_kind == s.device_kind)
    picks = {
        "your best": session.scalar(select(LeaderboardEntry).where(*same, LeaderboardEntry.user_id == s.user_id)),
        "leader": session.scalar(
            select(LeaderboardEntry).where(*same).order_by(LeaderboardEntry.score.desc()).limit(1)
        ),
    }
    compared: dict[str, dict[str, Any]] = {}
    for label, entry in picks.items():
        if entry is None or entry.submission_id == s.id:
            continue
        evaluation = session.scalar(select(Result.evaluation).where(Result.submission_id == entry.submission_id))
        speedups = {w["name"]: w.get("speedup") for w in (evaluation or {}).get("workloads", [])}
        compared[label] = dict(
            submission_id=entry.submission_id, user=entry.user.name, score=entry.score, speedups=speedups
        )
    return compared


def submission_page(db: Database, submission_id: int, who: Caller | None) -> SubmissionPage:
    with db.read() as session:
        s = session.get(Submission, submission_id)
        if s is None:
            raise PageNotFound(f"there is no submission {submission_id}")
        blob = session.get(SolutionBlob, s.solution_hash)
        assert blob is not None
        visible = sees_private(session, who, s)
        author_id, language, code = s.user_id, blob.language, dict(blob.sources) if visible else None
        compared = _compare(session, s) if s.mode != "test" else {}
    shown = submission_detail(db, submission_id, who)
    evaluation = shown.evaluation.model_dump(mode="json") if shown.evaluation else None
    profile = shown.evaluation.profile if shown.evaluation else None
    return SubmissionPage(
        detail=shown,
        author_id=author_id,
        code=code,
        language=language,
        score_interval=score_interval(evaluation),
        compared=compared,
        roofline=Markup(roofline.for_record(profile)) if profile else None,
    )


@dataclass
class BestRank:
    problem: str
    device_kind: str
    rank: int
    of: int
    score: float
    submission_id: int


@dataclass
class UserPage:
    name: str
    role: str
    joined: dt.datetime
    submissions: list[SubmissionOut]
    ranks: list[BestRank]


def user_page(db: Database, name: str, limit: int = 100, who: Caller | None = None) -> UserPage:
    """A user's newest submissions and their best on each leaderboard with its rank: indexed
    reads bounded by `limit` and by the leaderboards' rows, not by the submissions stored. A
    result held by a contest's freeze shows to `who` only where they may see it."""
    leaderboard.release_due(db)
    with db.read() as session:
        user = session.scalar(select(User).where(User.name == name))
        if user is None:
            raise PageNotFound(f"there is no user {name!r}")
        subs = search(session, user=name, limit=limit, viewer=who)
        scope = holdback.scope(session, who)
        slugs = dict(session.execute(select(Problem.id, Problem.slug).where(Problem.current)).all())
        best: dict[tuple[int, str], tuple[float, int]] = {}
        for problem_id, kind, score, sid in session.execute(
            select(
                LeaderboardEntry.problem_id,
                LeaderboardEntry.device_kind,
                LeaderboardEntry.score,
                LeaderboardEntry.submission_id,
            ).where(LeaderboardEntry.user_id == user.id, LeaderboardEntry.problem_id.in_(list(slugs)))
        ):
            best[(problem_id, kind)] = (score, sid)
        for r in leaderboard.held_bests(session, scope, utcnow(), HeldBest.user_id == user.id):
            kept = best.get((r.problem_id, r.device_kind))
            if r.problem_id in slugs and (kept is None or r.score > kept[0]):
                best[(r.problem_id, r.device_kind)] = (r.score, r.submission_id)
        ranks: list[BestRank] = []
        for (problem_id, kind), (score, sid) in sorted(best.items(), key=lambda b: (slugs[b[0][0]], b[0][1])):
            same = (LeaderboardEntry.problem_id == problem_id, LeaderboardEntry.device_kind == kind)
            others = (*same, LeaderboardEntry.user_id != user.id)
            above = (
                session.scalar(
                    select(func.count()).select_from(LeaderboardEntry).where(*others, LeaderboardEntry.score > score)
                )
                or 0
            )
            total = (session.scalar(select(func.count()).select_from(LeaderboardEntry).where(*others)) or 0) + 1
            ranks.append(
                BestRank(
                    problem=slugs[problem_id],
                    device_kind=kind,
                    rank=above + 1,
                    of=total,
                    score=score,
                    submission_id=sid,
                )
            )
        return UserPage(name=user.name, role=user.role, joined=user.created_at, submissions=subs, ranks=ranks)


@dataclass
class RunnerRow:
    name: str
    account: str
    hostname: str
    device_kinds: list[str]
    devices: list[dict[str, Any]]
    version: str
    jobs_done: int
    last_seen_at: dt.datetime
    online: bool


@dataclass
class JobRow:
    id: int
    submission_id: int
    problem: str
    user: str
    device_kind: str
    state: str
    attempts: int
    queued_at: dt.datetime
    lease_expires_at: dt.datetime | None
    runner: str | None


@dataclass
class AdminPage:
    runners: list[RunnerRow]
    jobs: list[JobRow]
    health: Health


def admin_page(db: Database, limit: int = 200) -> AdminPage:
    now = utcnow()
    with db.read() as session:
        runners = [
            RunnerRow(
                name=r.name,
                account=account,
                hostname=r.hostname,
                device_kinds=list(r.device_kinds),
                devices=list(r.devices),
                version=r.version,
                jobs_done=r.jobs_done,
                last_seen_at=r.last_seen_at,
                online=now - r.last_seen_at < RUNNER_ONLINE,
            )
            for r, account in session.execute(
                select(Runner, User.name).join(User, User.id == Runner.user_id).order_by(Runner.last_seen_at.desc())
            )
        ]
        names = {r.id: r.name for r in session.scalars(select(Runner))}
        query = (
            select(Job, Problem.slug, User.name)
            .join(Submission, Submission.id == Job.submission_id)
            .join(Problem, Problem.id == Submission.problem_id)
            .join(User, User.id == Submission.user_id)
            .where(Job.state.in_(("queued", "leased")))
            .order_by(Job.id)
            .limit(limit)
        )
        jobs = [
            JobRow(
                id=j.id,
                submission_id=j.submission_id,
                problem=slug,
                user=user,
                device_kind=j.device_kind,
                state=j.state,
                attempts=j.attempts,
                queued_at=j.queued_at,
                lease_expires_at=j.lease_expires_at,
                runner=names.get(j.runner_id) if j.runner_id else None,
            )
            for j, slug, user in session.execute(query)
        ]
    return AdminPage(runners=runners, jobs=jobs, health=health(db))


def tokens_of(db: Database, user_id: int) -> list[TokenInfo]:
    with db.read() as session:
        return [
            token_info(t)
            for t in session.scalars(select(Token).where(Token.user_id == user_id).order_by(Token.id.desc()))
        ]
