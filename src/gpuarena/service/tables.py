"""The database schema, as SQLAlchemy ORM classes: the one place the tables are gathered.

Times are naive UTC datetimes. Alembic migrations in `service/migrations` create these tables;
a test checks that the migrations and this module agree.

Accounts, problems, submissions, jobs, runners and leaderboards are described here; the
features' tables are in their own modules (contest_tables.py, bounty_tables.py,
sample_tables.py) on the same Base (table_base.py), and re-exported from here, so importing
this module registers every table in the one MetaData Alembic reads.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from gpuarena.service.bounty_tables import Bounty, BountyEvent
from gpuarena.service.contest_tables import ContestEntry, ContestOrganizer, ContestRow, TeamMember
from gpuarena.service.sample_tables import SampleRow
from gpuarena.service.table_base import Base, utcnow

__all__ = [
    "Base",
    "BestPointRow",
    "Bounty",
    "BountyEvent",
    "ContestEntry",
    "ContestOrganizer",
    "ContestRow",
    "DeviceKind",
    "HeldBest",
    "Invite",
    "Job",
    "LeaderboardEntry",
    "Problem",
    "RateCounter",
    "Result",
    "Runner",
    "SampleRow",
    "SolutionBlob",
    "Submission",
    "TeamMember",
    "Token",
    "User",
    "WebSession",
    "Webhook",
    "utcnow",
]


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16))
    """admin, organiser, participant or runner."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Token(Base):
    """An API token; only its SHA-256 is stored, the token itself is shown once."""

    __tablename__ = "tokens"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    name: Mapped[str] = mapped_column(String(64), default="")
    prefix: Mapped[str] = mapped_column(String(16))
    """The first characters, so a person can tell tokens apart in a list."""
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    device_kinds: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    """Runner tokens: the device kinds it may claim jobs for (None: any)."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_used_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    user: Mapped[User] = relationship(lazy="joined")


class WebSession(Base):
    """A browser signed in to the pages with a token: the signed cookie carries a random key
    whose SHA-256 is stored here, so signing out revokes the session on the server and a
    copy of the cookie taken before then no longer signs anyone in."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(primary_key=True)
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("tokens.id"), index=True)
    """The token pasted to sign in; revoking it ends the session too."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)

    token: Mapped[Token] = relationship(lazy="joined")


class Invite(Base):
    """A sign-up link an organiser or admin made: whoever opens it picks a name and gets an
    account and a token, without shell access to the server. Only the code's SHA-256 is stored."""

    __tablename__ = "invites"

    id: Mapped[int] = mapped_column(primary_key=True)
    hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    """The code's first characters, to tell invites apart in a list."""
    role: Mapped[str] = mapped_column(String(16), default="participant")
    uses_left: Mapped[int] = mapped_column(Integer, default=1)
    note: Mapped[str] = mapped_column(String(200), default="")
    created_by: Mapped[int] = mapped_column(ForeignKey("users.id"))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)


class Webhook(Base):
    """A URL the service POSTs to when one of its owner's submissions finishes, signed with
    HMAC-SHA256 over the body with the webhook's secret (so a chat bot or CI can trust it)."""

    __tablename__ = "webhooks"

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    url: Mapped[str] = mapped_column(String(500))
    secret: Mapped[str] = mapped_column(String(64))
    """Kept in the clear: the service signs with it (shown to the owner once, at creation)."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_called_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_status: Mapped[str] = mapped_column(String(200), default="")
    """The last delivery's outcome: an HTTP status, or why it failed."""


class Problem(Base):
    """One version of a problem folder. A new version starts when any file that affects
    evaluation changes (everything but Markdown); the owner and openness stay with the slug."""

    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("slug", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    slug: Mapped[str] = mapped_column(String(200), index=True)
    """The folder path, e.g. level1/softmax."""
    version: Mapped[int] = mapped_column(Integer)
    current: Mapped[bool] = mapped_column(Boolean, default=True)
    content_hash: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(200))
    level: Mapped[int] = mapped_column(Integer)
    weight: Mapped[float] = mapped_column(Float)
    summary: Mapped[str] = mapped_column(Text, default="")
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    files: Mapped[dict[str, Any]] = mapped_column(JSON)
    """Relative path -> text: what a runner needs to rebuild the folder."""
    secret_seed: Mapped[int] = mapped_column(BigInteger)
    """No longer used: every ranked job draws its own seed (Job.seed), and new versions store 0.
    Older rows keep the seed their ranked runs used before migration 0004, so that those
    verdicts can still be reproduced; it never leaves the database."""
    solutions_public: Mapped[bool] = mapped_column(Boolean, default=False)
    """Everyone may read the code submitted to this problem (set by its owner or an admin on the web page)."""
    owner_id: Mapped[int | None] = mapped_column(ForeignKey("users.id"), nullable=True)
    """The account that may make the solutions public (besides admins)."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class SolutionBlob(Base):
    """Solution code, stored once per content hash however often it is submitted."""

    __tablename__ = "solution_blobs"

    hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    language: Mapped[str] = mapped_column(String(16))
    manifest: Mapped[dict[str, Any]] = mapped_column(JSON)
    sources: Mapped[dict[str, Any]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Submission(Base):
    __tablename__ = "submissions"
    __table_args__ = (
        Index("ix_submissions_user_created", "user_id", "created_at"),
        Index("ix_submissions_user_newest", "user_id", "id"),
        Index("ix_submissions_problem_newest", "problem_id", "id"),
        UniqueConstraint("user_id", "client_key", name="uq_submissions_client_key"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    solution_hash: Mapped[str] = mapped_column(ForeignKey("solution_blobs.hash"))
    device_kind: Mapped[str] = mapped_column(String(64))
    mode: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default="QUEUED")
    """QUEUED, RUNNING, a harness verdict (PASSED, WRONG_VALUES, ...) or ERROR (the
    infrastructure failed it: attempts exhausted)."""
    reason: Mapped[str] = mapped_column(Text, default="")
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    client_key: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The client's idempotency key: a repeat of the same key by the same user returns this
    submission instead of making another (safe retries through failing API servers)."""
    held_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    """A contest entry made during its contest's freeze: until then (the contest's end) its
    result is shown to its author and the contest's organisers and admins only (holdback.py)."""

    user: Mapped[User] = relationship(lazy="joined")
    problem: Mapped[Problem] = relationship(lazy="joined")


class Job(Base):
    """A submission's place in the queue. A claim takes a lease (a random token and a
    deadline); only the holder of the current lease can renew it or post the result."""

    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_claim", "state", "device_kind", "id"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), unique=True)
    device_kind: Mapped[str] = mapped_column(String(64))
    state: Mapped[str] = mapped_column(String(16), default="queued")
    """queued, leased, done or failed."""
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    max_attempts: Mapped[int] = mapped_column(Integer, default=3)
    lease_token: Mapped[str | None] = mapped_column(String(64), nullable=True)
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    runner_id: Mapped[int | None] = mapped_column(ForeignKey("runners.id"), nullable=True)
    device: Mapped[str] = mapped_column(String(64), default="")
    """The runner's device slot that holds (or last held) the job, e.g. cuda:1."""
    queued_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    """When queued, or queued again after a pre-emption (it goes behind the jobs that waited)."""
    claimed_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    """The last claim, or pre-emption (its user counts as served then: queue.queue_order)."""
    preemptions: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """Times a runner was told to stop it so that other users' waiting jobs could run
    (queue.preempt; not attempts: a pre-empted job was not at fault)."""
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    last_error: Mapped[str] = mapped_column(Text, default="")
    seed: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    """A ranked job's own seed (None for benchmark and test jobs, which use the public seed),
    drawn by the server when the job is queued: its inputs and checked calls are those of no
    other job. It goes to the runner inside the claimed job and nowhere else (no API, no page,
    admins included); kept here so that an operator can reproduce the verdict."""


class Result(Base):
    """The Evaluation record a runner posted; at most one per job (the unique key enforces it)."""

    __tablename__ = "results"

    id: Mapped[int] = mapped_column(primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id"), unique=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"), index=True)
    runner_id: Mapped[int | None] = mapped_column(ForeignKey("runners.id"), nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    evaluation: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class Runner(Base):
    __tablename__ = "runners"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    name: Mapped[str] = mapped_column(String(128))
    hostname: Mapped[str] = mapped_column(String(256), default="")
    device_kinds: Mapped[list[Any]] = mapped_column(JSON, default=list)
    devices: Mapped[list[Any]] = mapped_column(JSON, default=list)
    """One entry per worker slot: {"device": "cuda:0", "kind": "H100", "name": ..., "healthy": true}."""
    version: Mapped[str] = mapped_column(String(32), default="")
    jobs_done: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class DeviceKind(Base):
    __tablename__ = "device_kinds"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    first_seen_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    last_seen_at: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)


class LeaderboardEntry(Base):
    """Each user's best ranked, passing submission per problem version and device kind, kept
    up to date in the transaction that accepts a result, so a read is one indexed query. Only
    results everyone may see: a result held by a contest's freeze waits in HeldBest."""

    __tablename__ = "leaderboard_entries"
    __table_args__ = (
        Index("ix_leaderboard_read", "problem_id", "device_kind", "score"),
        Index("ix_leaderboard_user", "user_id"),
    )

    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), primary_key=True)
    device_kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    score: Mapped[float] = mapped_column(Float)
    achieved_at: Mapped[dt.datetime] = mapped_column(DateTime)
    score_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    score_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    """The score's 95% interval (leaderboard.score_interval), copied from the record when the
    result is accepted, so that a leaderboard shows ties without reading the records."""

    user: Mapped[User] = relationship(lazy="joined")


class HeldBest(Base):
    """A user's best result on a problem and device kind among their entries to one contest made
    during its freeze: held from the public leaderboards until held_until (the contest's end),
    then folded into LeaderboardEntry (leaderboard.release_due). Its author and the contest's
    organisers and admins see it on the leaderboards meanwhile."""

    __tablename__ = "held_bests"
    __table_args__ = (
        Index("ix_held_bests_board", "problem_id", "device_kind", "score"),
        Index("ix_held_bests_until", "held_until"),
    )

    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), primary_key=True)
    device_kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    contest_id: Mapped[int] = mapped_column(ForeignKey("contests.id"), primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    score: Mapped[float] = mapped_column(Float)
    achieved_at: Mapped[dt.datetime] = mapped_column(DateTime)
    score_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    score_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    held_until: Mapped[dt.datetime] = mapped_column(DateTime)


class BestPointRow(Base):
    """A moment the best ranked score of a problem and device kind went up (the problem page's
    history), written when the result is accepted: a result is written when it beats every
    public point before it. A held result's point carries its hold (held_until, contest_id) and
    is shown as the result is; a read keeps the points that beat those before them."""

    __tablename__ = "best_points"
    __table_args__ = (Index("ix_best_points_board", "problem_id", "device_kind", "at"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    device_kind: Mapped[str] = mapped_column(String(64))
    at: Mapped[dt.datetime] = mapped_column(DateTime)
    score: Mapped[float] = mapped_column(Float)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"))
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id"))
    held_until: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    contest_id: Mapped[int | None] = mapped_column(ForeignKey("contests.id"), nullable=True)


class RateCounter(Base):
    """Fixed-window request counters per user and action, incremented atomically in the
    database so the limit holds across threads and API servers."""

    __tablename__ = "rate_counters"

    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), primary_key=True)
    action: Mapped[str] = mapped_column(String(32), primary_key=True)
    window: Mapped[int] = mapped_column(BigInteger, default=0)
    """Start of the current window, in seconds since the epoch."""
    count: Mapped[int] = mapped_column(Integer, default=0)
