"""The job queue, in the database.

Jobs are claimed fairly between users: by turn (the user's jobs running, plus the job's place
among the user's queued ones), then oldest first (one user's fifty jobs do not starve another's
one, and a free slot goes to the user running fewest). A running job can be pre-empted
(`preempt`): when other users' jobs have waited longer than a set time while its user holds
more than their share of the device kind's slots, its runner is told at its heartbeat to
stop it, and it goes back to the queue behind them, not counted as an attempt; it then waits for
a free slot and pre-empts nothing itself (else it takes the slot back from the job that replaced
it, and two users' jobs trade turns until neither finishes). A claim takes a
lease: a random token and a deadline. Heartbeats move the deadline; a lease
that runs out puts the job back in the queue (up to max_attempts, then the submission ends
as ERROR). A result is accepted only with the job's current lease token, once: posting it
again with the same token is acknowledged without a second row; any other token is refused.
"""

from __future__ import annotations

import datetime as dt
import math
import secrets
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from gpuarena.contracts.records import Evaluation
from gpuarena.dataset.sample import SampleReport
from gpuarena.errors import GpuarenaError
from gpuarena.service import bounties, contests, samples
from gpuarena.service.db import Database
from gpuarena.service.device_kinds import RUNNER_ONLINE
from gpuarena.service.leaderboard import record_result
from gpuarena.service.redact import redact, redact_evaluation
from gpuarena.service.tables import Job, Result, Runner, Submission, User, utcnow

LEASE_S = 60.0
"""How long a claim holds without a heartbeat; runners renew every LEASE_S / 4."""


class LeaseLost(GpuarenaError):
    """The caller does not hold the job's lease (it expired and was re-queued, or was never theirs)."""


@dataclass
class Claimed:
    job: Job
    submission: Submission


def enqueue(session: Session, submission: Submission, max_attempts: int = 3) -> Job:
    """Queue a submission; a ranked one gets a seed of its own (inputs and checked calls no
    other ranked job shares, so nothing one submission learns helps another)."""
    seed = secrets.randbits(62) if submission.mode == "ranked" else None
    job = Job(submission_id=submission.id, device_kind=submission.device_kind, max_attempts=max_attempts, seed=seed)
    session.add(job)
    session.flush()
    return job


def reap_expired(session: Session, now: dt.datetime | None = None) -> list[int]:
    """Re-queue jobs whose lease ran out; fail those out of attempts. Returns the submissions
    that ended as ERROR (their authors' webhooks are told, once this commits)."""
    now = now or utcnow()
    query = select(Job).where(Job.state == "leased", Job.lease_expires_at < now)
    if session.get_bind().dialect.name == "postgresql":
        # lock what we re-queue, and skip rows another transaction holds: without the lock a
        # concurrent claim's reap-and-lease of the same job would be overwritten by ours
        query = query.with_for_update(skip_locked=True)
    return [
        job.submission_id
        for job in list(session.scalars(query))
        if _requeue_or_fail(session, job, f"runner lost the lease (attempt {job.attempts})")
    ]


def _requeue_or_fail(session: Session, job: Job, why: str) -> bool:
    """Back in the queue, or (out of attempts) the submission ends as ERROR: then True."""
    job.last_error = why
    job.lease_token = None
    job.lease_expires_at = None
    submission = session.get(Submission, job.submission_id)
    assert submission is not None
    if job.attempts >= job.max_attempts:
        job.state = "failed"
        job.finished_at = utcnow()
        submission.status, submission.reason, submission.finished_at = (
            "ERROR",
            f"{why}; gave up after {job.attempts} attempts",
            utcnow(),
        )
        return True
    job.state = "queued"
    submission.status = "QUEUED"
    if job.seed is not None:  # a ranked job's next attempt draws inputs no earlier attempt saw
        job.seed = secrets.randbits(62)
    return False


def queue_order(session: Session, device_kinds: list[str]) -> list[int]:
    """The queued jobs for device_kinds, in the order they are claimed. A queued job's turn is
    its user's jobs running plus its place among the user's queued jobs (by when queued: a
    pre-empted job goes behind its user's others), so a user with a job running waits behind
    one with none. Between equal turns the user served longest ago goes first (the latest claim
    or pre-emption of any of the user's jobs on these kinds; never-served users first), so one
    runner finishing one job at a time still alternates between users; then the oldest job.

    Three small indexed reads and a sort here: as one SQL query with window functions, SQLite
    planned it as a scan of every submission (0.7 s at 100,000 stored), and a live event
    stream and every claim ran it."""
    in_flight = session.scalars(
        select(Job.id).where(Job.state.in_(("queued", "leased")), Job.device_kind.in_(device_kinds))
    ).all()
    if not in_flight:
        return []
    rows = session.execute(
        select(Job.id, Job.state, Job.queued_at, Submission.user_id)
        .join(Submission, Submission.id == Job.submission_id)
        .where(Job.id.in_(in_flight))
    ).all()
    running = Counter(user for _, state, _, user in rows if state == "leased")
    queued = sorted(
        ((queued_at, job_id, user) for job_id, state, queued_at, user in rows if state == "queued"),
        key=lambda row: (row[0], row[1]),
    )
    if not queued:
        return []
    waiting = sorted({user for _, _, user in queued})
    served: dict[int, dt.datetime | None] = dict(
        session.execute(  # (user_id, latest claim) pairs
            select(Submission.user_id, func.max(Job.claimed_at))
            .join(Job, Job.submission_id == Submission.id)
            .where(Submission.user_id.in_(waiting), Job.device_kind.in_(device_kinds), Job.claimed_at.is_not(None))
            .group_by(Submission.user_id)
        ).all()
    )
    place: Counter[int] = Counter()
    keyed = []
    for _, job_id, user in queued:
        place[user] += 1
        last = served.get(user)
        keyed.append(((running[user] + place[user], last is not None, last or dt.datetime.min, job_id), job_id))
    return [job_id for _, job_id in sorted(keyed)]


CLAIM_CANDIDATES = 8
"""Jobs tried per claim on PostgreSQL, where a job another server is claiming is skipped."""


def claim(
    db: Database,
    runner_id: int,
    device_kinds: list[str],
    lease_s: float = LEASE_S,
    device: str = "",
    errored: list[int] | None = None,
) -> Claimed | None:
    """Lease the next queued job for one of device_kinds in fair order, or None when there is
    none; device names the runner's slot that will run it (recorded on the job). Expired
    leases are reaped first: submissions that ended as ERROR there go into `errored`."""
    if not device_kinds:
        return None
    with db.write() as session:
        failed = reap_expired(session)
        if errored is not None:
            errored.extend(failed)
        candidates = queue_order(session, device_kinds)[:CLAIM_CANDIDATES]
        job = None
        for job_id in candidates:  # window functions cannot take row locks: lock the chosen row itself
            query = select(Job).where(Job.id == job_id, Job.state == "queued")
            if db.is_postgres:
                query = query.with_for_update(skip_locked=True)
            job = session.scalar(query)
            if job is not None:
                break
        if job is None:
            return None
        now = utcnow()
        job.state, job.runner_id, job.claimed_at, job.device = "leased", runner_id, now, device
        job.lease_token = secrets.token_hex(16)
        job.lease_expires_at = now + dt.timedelta(seconds=lease_s)
        job.attempts += 1
        submission = session.get(Submission, job.submission_id)
        assert submission is not None
        if submission.mode == "ranked" and job.seed is None:
            # queued before jobs had seeds (migration 0004): draw it now, and keep it with the
            # job, so that the seed this verdict came from is on record
            job.seed = secrets.randbits(62)
        submission.status = "RUNNING"
        return Claimed(job=job, submission=submission)


def queue_position(session: Session, job: Job) -> int | None:
    """1 for the next job its device kind's runners will claim; None when it is not queued."""
    if job.state != "queued":
        return None
    queued = queue_order(session, [job.device_kind])
    return queued.index(job.id) + 1 if job.id in queued else None


def cancel(session: Session, submission: Submission, by: str) -> None:
    """Stop a submission that has not finished: a queued job leaves the queue; a running one
    loses its lease, so its runner stops it at its next heartbeat (a few seconds) and its
    result, if it comes, is refused."""
    job = session.scalar(select(Job).where(Job.submission_id == submission.id))
    if submission.status not in ("QUEUED", "RUNNING") or job is None or job.state not in ("queued", "leased"):
        raise GpuarenaError(f"submission {submission.id} has already finished ({submission.status}): nothing to cancel")
    job.state, job.lease_token, job.lease_expires_at = "cancelled", None, None
    job.finished_at = utcnow()
    job.last_error = f"cancelled by {by}"
    submission.status, submission.reason, submission.finished_at = "CANCELLED", f"cancelled by {by}", job.finished_at


def _held(session: Session, db: Database, job_id: int, lease_token: str) -> Job:
    query = select(Job).where(Job.id == job_id)
    if db.is_postgres:
        query = query.with_for_update()
    job = session.scalar(query)
    if job is None:
        raise LeaseLost(f"no job {job_id}")
    if job.lease_token != lease_token:
        raise LeaseLost(f"job {job_id}: this lease is no longer valid (the job was re-queued or finished elsewhere)")
    return job


def heartbeat(db: Database, runner_id: int, leases: dict[int, str], lease_s: float = LEASE_S) -> list[int]:
    """Extend the runner's leases; returns the job ids whose lease is lost (stop those jobs)."""
    lost = []
    with db.write() as session:
        now = utcnow()
        session.execute(update(Runner).where(Runner.id == runner_id).values(last_seen_at=now))
        for job_id, token in leases.items():
            renewed = session.execute(
                update(Job)
                .where(Job.id == job_id, Job.lease_token == token, Job.state == "leased", Job.runner_id == runner_id)
                .values(lease_expires_at=now + dt.timedelta(seconds=lease_s))
            )
            if renewed.rowcount != 1:  # type: ignore[attr-defined]  # an UPDATE gives a CursorResult
                lost.append(job_id)
    return lost


@dataclass
class _Slot:
    job_id: int
    user_id: int
    user: str
    runner_id: int | None
    claimed_at: dt.datetime | None
    preemptions: int


def slots_of(session: Session, kind: str, now: dt.datetime) -> int:
    """The healthy device slots of `kind` on the runners online now."""
    return sum(
        1
        for devices in session.scalars(select(Runner.devices).where(Runner.last_seen_at > now - RUNNER_ONLINE))
        for slot in devices or []
        if slot.get("kind") == kind and slot.get("healthy", True)
    )


def preemptible(session: Session, kind: str, now: dt.datetime, after_s: float, max_preemptions: int) -> list[_Slot]:
    """The running jobs on `kind` to stop now, in any runner. A user's share is the kind's slots
    (those of the runners online, or those busy if more) over the users with jobs queued or
    running there. Users below their share whose jobs have waited more than after_s, and who
    were not served (a claim or a pre-emption of theirs) within after_s either, are owed slots
    (a pre-empted job counts for nothing here: it had its turn, and waits for a free slot),
    up to their share, less the slots free now (their jobs will be claimed there). Users above
    their share give back their excess, up to what is owed: their jobs that have run at least
    after_s and were pre-empted fewer than max_preemptions times (a job is not stopped over
    and over), the furthest-over user first, then the most recently started job (the least
    work lost). The same state gives the same choice whichever runner asks."""
    waited = now - dt.timedelta(seconds=after_s)
    served = dict(
        session.execute(
            select(Submission.user_id, func.max(Job.claimed_at))
            .join(Job, Job.submission_id == Submission.id)
            .where(Job.device_kind == kind)
            .group_by(Submission.user_id)
        ).all()
    )
    overdue = Counter(
        user
        for user in session.scalars(
            select(Submission.user_id)
            .join(Job, Job.submission_id == Submission.id)
            .where(Job.state == "queued", Job.device_kind == kind, Job.queued_at <= waited, Job.preemptions == 0)
        )
        if (last := served.get(user)) is None or last <= waited
    )
    if not overdue:
        return []
    slots = [
        _Slot(*row)
        for row in session.execute(
            select(Job.id, Submission.user_id, User.name, Job.runner_id, Job.claimed_at, Job.preemptions)
            .join(Submission, Submission.id == Job.submission_id)
            .join(User, User.id == Submission.user_id)
            .where(Job.state == "leased", Job.device_kind == kind)
        )
    ]
    queued_users = set(
        session.scalars(
            select(Submission.user_id)
            .join(Job, Job.submission_id == Submission.id)
            .where(Job.state == "queued", Job.device_kind == kind)
            .distinct()
        )
    )
    capacity = max(slots_of(session, kind, now), len(slots))
    held = Counter(slot.user_id for slot in slots)
    share = capacity / len(queued_users | set(held))
    owed = sum(min(n, math.ceil(share) - held[user]) for user, n in overdue.items() if held[user] < share)
    owed -= capacity - len(slots)  # free slots: the waiting jobs will be claimed there
    candidates = sorted(
        (
            slot
            for slot in slots
            if held[slot.user_id] > share
            and slot.claimed_at is not None
            and slot.claimed_at <= waited
            and slot.preemptions < max_preemptions
        ),
        # the furthest-over user first; then the most recently started job
        key=lambda slot: (-held[slot.user_id], -(slot.claimed_at or now).timestamp(), -slot.job_id),
    )
    taken: Counter[int] = Counter()
    chosen: list[_Slot] = []
    for slot in candidates:
        if len(chosen) >= owed:
            break
        if taken[slot.user_id] < held[slot.user_id] - math.floor(share):
            taken[slot.user_id] += 1
            chosen.append(slot)
    return chosen


def preempt(db: Database, runner_id: int, after_s: float, max_preemptions: int = 2) -> list[int]:
    """Stop those of this runner's jobs that `preemptible` chooses (after_s 0: never): each goes
    back to the queue behind the jobs that waited (its user counts as served now), keeps its
    attempts (a pre-emption is not one) and its ranked job draws a new seed. Returns the job ids
    pre-empted: the runner stops them, and their lease is gone, so nothing they would post counts."""
    if after_s <= 0:
        return []

    def mine(session: Session, now: dt.datetime) -> list[tuple[str, _Slot]]:
        kinds = session.scalars(
            select(Job.device_kind).where(Job.state == "leased", Job.runner_id == runner_id).distinct()
        ).all()
        return [  # another runner's job is stopped at that runner's own heartbeat
            (kind, slot)
            for kind in kinds
            for slot in preemptible(session, kind, now, after_s, max_preemptions)
            if slot.runner_id == runner_id
        ]

    with db.read() as session:  # every heartbeat asks: a read, and a write only when there is work
        if not mine(session, utcnow()):
            return []
    stopped: list[int] = []
    with db.write() as session:  # decided again where the change is made
        now = utcnow()
        for kind, slot in mine(session, now):
            query = select(Job).where(Job.id == slot.job_id, Job.state == "leased", Job.runner_id == runner_id)
            if db.is_postgres:
                query = query.with_for_update()
            job = session.scalar(query)
            if job is None:
                continue  # finished or lost meanwhile
            ran = (now - (job.claimed_at or now)).total_seconds()
            job.state, job.lease_token, job.lease_expires_at = "queued", None, None
            job.attempts = max(job.attempts - 1, 0)
            job.preemptions += 1
            job.queued_at = job.claimed_at = now  # behind the waiting jobs, its user served just now
            job.last_error = (
                f"pre-empted after {ran:.0f} s: other users' jobs had waited over {after_s:g} s while "
                f"{slot.user} held more than their share of the {kind} slots; queued again"
            )
            if job.seed is not None:
                job.seed = secrets.randbits(62)
            submission = session.get(Submission, job.submission_id)
            assert submission is not None
            submission.status = "QUEUED"
            stopped.append(job.id)
    return stopped


def complete(
    db: Database,
    runner_id: int,
    job_id: int,
    lease_token: str,
    evaluation: Evaluation,
    sample: SampleReport | None = None,
) -> tuple[Result, bool]:
    """Accept the job's result: (the stored result, True) the first time, (it, False) on a repeat.
    A sample's check comes with its report (stored with the sample)."""
    with db.write() as session:
        job = _held(session, db, job_id, lease_token)
        if job.state == "done":
            existing = session.scalar(select(Result).where(Result.job_id == job.id))
            assert existing is not None
            return existing, False
        if job.state != "leased" or job.runner_id != runner_id:
            raise LeaseLost(f"job {job_id} is {job.state}, not leased to this runner")
        submission = session.get(Submission, job.submission_id)
        assert submission is not None
        # the log and reasons are shown to people: not the judging machine's layout or name
        hostname = session.scalar(select(Runner.hostname).where(Runner.id == runner_id))
        evaluation = redact_evaluation(evaluation, [hostname])
        now = utcnow()
        result = Result(
            job_id=job.id,
            submission_id=submission.id,
            runner_id=runner_id,
            status=evaluation.status.value,
            score=evaluation.score,
            evaluation=evaluation.model_dump(mode="json"),
        )
        session.add(result)
        job.state, job.finished_at = "done", now
        submission.status, submission.reason = evaluation.status.value, evaluation.reason
        submission.score, submission.finished_at = evaluation.score, now
        session.execute(
            update(Runner).where(Runner.id == runner_id).values(jobs_done=Runner.jobs_done + 1, last_seen_at=now)
        )
        session.flush()
        record_result(session, submission, result.evaluation)
        bounties.on_result(session, submission)  # a claimer's ranked run may verify a speed bounty
        samples.on_result(session, submission, evaluation, sample, [hostname])  # before the contest reads it
        contests.on_result(session, submission, evaluation)
        return result, True


def requeue_runner(db: Database, runner_id: int, why: str) -> list[int]:
    """Put back every job leased to runner_id (a runner process that just started holds none
    of them: its predecessor died); counted as an attempt, as an expiry would be. Returns the
    submissions that ended as ERROR, out of attempts."""
    with db.write() as session:
        query = select(Job).where(Job.state == "leased", Job.runner_id == runner_id)
        if db.is_postgres:
            query = query.with_for_update(skip_locked=True)
        return [
            job.submission_id
            for job in list(session.scalars(query))
            if _requeue_or_fail(session, job, f"{why} (attempt {job.attempts})")
        ]


def give_back(
    db: Database, runner_id: int, job_id: int, lease_token: str, error: str = "", harness_failed: bool = False
) -> bool:
    """The runner lets go of a job: shutting down (error empty; the attempt is not counted),
    its device failed (error says how; counted, so a job that kills runners ends), or its
    harness died without a record on a healthy device (harness_failed: the solution may have
    broken it, and is not run again blindly). True when the submission ended as ERROR."""
    with db.write() as session:
        job = _held(session, db, job_id, lease_token)
        if job.state != "leased" or job.runner_id != runner_id:
            raise LeaseLost(f"job {job_id} is {job.state}, not leased to this runner")
        if not error:
            job.attempts -= 1
        elif harness_failed:
            job.attempts = max(job.attempts, job.max_attempts)
        # the error is the runner's (a crashed job process's last lines): it can become the
        # submission's public reason, so the machine's paths and name come out first
        error = redact(error, [session.scalar(select(Runner.hostname).where(Runner.id == runner_id))])
        return _requeue_or_fail(session, job, error or "runner shut down")
