"""The API runners use: say hello, claim a job (long polling), heartbeat, post the result."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import or_, select

from gpuarena.contracts.packed import PackedProblem
from gpuarena.contracts.wire import (
    PROTOCOL_VERSION,
    ClaimRequest,
    HeartbeatReply,
    HeartbeatRequest,
    JobKind,
    Release,
    ResultReply,
    RunnerHello,
    RunnerId,
)
from gpuarena.dataset.sample_pack import is_sample
from gpuarena.errors import GpuarenaError
from gpuarena.migration.target import is_app
from gpuarena.runner_wire import JOBS, ClaimedJob, TypedJob, claim_json
from gpuarena.service import queue, samples, webhooks
from gpuarena.service.config import Settings
from gpuarena.service.db import Database, dialect_insert
from gpuarena.service.deps import Caller, get_db, get_settings, runner_account
from gpuarena.service.errors import Forbidden
from gpuarena.service.offloop import OffLoopRoute
from gpuarena.service.schemas import ResultPost
from gpuarena.service.tables import DeviceKind, Job, Problem, Runner, SolutionBlob, utcnow
from gpuarena.solutions.model import Solution, SolutionManifest

router = APIRouter(prefix="/api/runner", tags=["runners"], route_class=OffLoopRoute)
DB = Annotated[Database, Depends(get_db)]
RUNNER = Annotated[Caller, Depends(runner_account)]
SETTINGS = Annotated[Settings, Depends(get_settings)]
POLL_S = 0.1
"""How often a waiting claim looks at the queue (a cheap read; the claim itself is a write)."""


def _own_runner(db: Database, who: Caller, runner_id: int) -> list[str]:
    """Check that runner_id is the caller's; returns the kinds of its healthy devices."""
    with db.read() as session:
        runner = session.get(Runner, runner_id)
        if runner is None or runner.user_id != who.user_id:
            raise Forbidden(f"runner {runner_id} is not registered to {who.name}")
        return list(runner.device_kinds or [])


def _known_protocol(protocol: int) -> None:
    """Refuse a runner newer than this server: it would read claims this server cannot write."""
    if protocol > PROTOCOL_VERSION:
        raise GpuarenaError(
            f"this runner speaks runner protocol {protocol}, but this server knows only up to "
            f"{PROTOCOL_VERSION}: upgrade the server first, then the runners (docs/deploy.md, Upgrades)"
        )


def _allowed_kinds(who: Caller, kinds: list[str]) -> list[str]:
    if who.device_kinds is None:
        return kinds
    outside = sorted(set(kinds) - set(who.device_kinds))
    if outside:
        raise Forbidden(
            f"this runner token is scoped to device kinds {', '.join(who.device_kinds) or '(none)'}; "
            f"it may not serve {', '.join(outside)} (ask an admin for a token with "
            f"`gpuarena users add NAME --role runner --device-kind {outside[0]}`)"
        )
    return kinds


@router.post("/hello")
def hello(body: RunnerHello, who: RUNNER, db: DB, settings: SETTINGS) -> RunnerId:
    """Register (or re-register) a runner and its devices; their kinds become submittable."""
    _known_protocol(body.protocol)
    kinds = sorted({d.kind for d in body.devices if d.healthy})
    _allowed_kinds(who, kinds)
    with db.write() as session:
        runner = session.scalar(select(Runner).where(Runner.user_id == who.user_id, Runner.name == body.name))
        if runner is None:
            runner = Runner(user_id=who.user_id, name=body.name)
            session.add(runner)
        runner.hostname, runner.version = body.hostname, body.version
        runner.devices = [d.model_dump() for d in body.devices]
        runner.device_kinds = kinds
        runner.last_seen_at = utcnow()
        for kind in kinds:
            session.execute(
                dialect_insert(session, DeviceKind)
                .values(name=kind)
                .on_conflict_do_update(index_elements=["name"], set_={"last_seen_at": utcnow()})
            )
        session.flush()
        runner_id = runner.id
    # a runner process says hello once, when it starts: it holds none of the jobs its name held
    # before (its predecessor died), so they go back to the queue now instead of at lease expiry
    for submission_id in queue.requeue_runner(db, runner_id, f"runner {body.name} restarted while running it"):
        webhooks.notify(db, submission_id, settings.webhooks_allow_private)
    return RunnerId(runner_id=runner_id)


def _work_waiting(db: Database, kinds: list[str]) -> bool:
    with db.read() as session:
        return (
            session.scalar(
                select(Job.id)
                .where(
                    Job.device_kind.in_(kinds),
                    or_(Job.state == "queued", (Job.state == "leased") & (Job.lease_expires_at < utcnow())),
                )
                .limit(1)
            )
            is not None
        )


def job_kind(spec: dict[str, Any]) -> JobKind:
    """The one place a job's kind is told: by the problem it runs on (a submission to a
    migration target is a port, one to the samples problem a sample; submissions.py holds each
    to its problem's kind)."""
    if is_app(spec):
        return "app"
    if is_sample(spec):
        return "sample"
    return "kernel"


def _claim(
    db: Database, settings: Settings, runner_id: int, kinds: list[str], device: str, protocol: int
) -> str | None:
    """The claimed job's JSON, in the shape of the runner's protocol (runner_wire.claim_json)."""
    errored: list[int] = []
    claimed = queue.claim(db, runner_id, kinds, settings.lease_s, device, errored)
    for submission_id in errored:  # out of attempts while reaping expired leases
        webhooks.notify(db, submission_id, settings.webhooks_allow_private)
    if claimed is None:
        return None
    job, submission = claimed.job, claimed.submission
    with db.read() as session:
        problem = session.get(Problem, submission.problem_id)
        blob = session.get(SolutionBlob, submission.solution_hash)
        assert problem is not None and blob is not None
        kind = job_kind(problem.spec)
        typed = JOBS[kind](
            job_id=job.id,
            lease_token=job.lease_token or "",
            lease_s=settings.lease_s,
            submission_id=submission.id,
            device_kind=job.device_kind,
            mode=submission.mode,
            seed=job.seed if submission.mode == "ranked" else None,  # the job's own, drawn by the server
            problem=(
                samples.packed_dataset(session)  # what a sample must not repeat
                if kind == "sample"
                else PackedProblem(id=problem.slug, files=problem.files, hash=problem.content_hash)
            ),
            solution=Solution(
                name=blob.name, manifest=SolutionManifest.model_validate(blob.manifest), sources=blob.sources
            ),
        )
    return claim_json(typed, protocol)


@router.post(
    "/claim",
    response_model=ClaimedJob | TypedJob,
    responses={204: {"description": "no job within wait_s"}},
)
async def claim(
    body: ClaimRequest, who: RUNNER, db: DB, settings: Annotated[Settings, Depends(get_settings)]
) -> Response:
    """Lease the oldest job for these device kinds, waiting up to wait_s for one to arrive: a
    ClaimedJob for a legacy runner (no protocol sent), a typed job (with its kind) for others."""
    _known_protocol(body.protocol)
    kinds = _allowed_kinds(who, body.device_kinds)
    healthy = await run_in_threadpool(_own_runner, db, who, body.runner_id)
    drained = sorted(set(kinds) - set(healthy))
    if drained:
        raise Forbidden(
            f"runner {body.runner_id} has no healthy device of kind {', '.join(drained)} "
            "(drained after a failed health check, or never reported)"
        )
    deadline = time.monotonic() + body.wait_s
    while True:
        if await run_in_threadpool(_work_waiting, db, kinds):
            job = await run_in_threadpool(_claim, db, settings, body.runner_id, kinds, body.device, body.protocol)
            if job is not None:
                return Response(job, media_type="application/json")
        if time.monotonic() >= deadline:
            return Response(status_code=204)
        await asyncio.sleep(POLL_S)


@router.post("/heartbeat")
def heartbeat(
    body: HeartbeatRequest, who: RUNNER, db: DB, settings: Annotated[Settings, Depends(get_settings)]
) -> HeartbeatReply:
    """Renew the runner's leases; the reply names jobs it no longer holds: cancelled, expired,
    or pre-empted (another user's job waited too long while this job's user held more than their
    share of the slots: it is queued again, and the runner stops it)."""
    _own_runner(db, who, body.runner_id)
    lost = queue.heartbeat(db, body.runner_id, body.leases, settings.lease_s)
    preempted = queue.preempt(db, body.runner_id, settings.preempt_after_s, settings.max_preemptions)
    lost = sorted(set(lost) | set(preempted))
    if body.devices is not None:
        kinds = _allowed_kinds(who, sorted({d.kind for d in body.devices if d.healthy}))
        with db.write() as session:
            runner = session.get(Runner, body.runner_id)
            assert runner is not None
            runner.devices = [d.model_dump() for d in body.devices]
            runner.device_kinds = kinds
    return HeartbeatReply(lost=lost, preempted=preempted)


@router.post("/jobs/{job_id}/result")
def post_result(job_id: int, body: ResultPost, who: RUNNER, db: DB, settings: SETTINGS) -> ResultReply:
    """Accept the Evaluation for a leased job, exactly once."""
    with db.read() as session:
        job = session.get(Job, job_id)
        runner_id = job.runner_id if job else None
    if runner_id is None:
        raise queue.LeaseLost(f"job {job_id} is not leased")
    _own_runner(db, who, runner_id)
    if body.runner_id is not None and body.runner_id != runner_id:
        raise queue.LeaseLost(f"job {job_id} is leased to runner {runner_id}, not runner {body.runner_id}")
    result, first = queue.complete(db, runner_id, job_id, body.lease_token, body.evaluation, body.sample)
    if first:
        webhooks.notify(db, result.submission_id, settings.webhooks_allow_private)
    return ResultReply(accepted=True, duplicate=not first)


@router.post("/jobs/{job_id}/release")
def release(job_id: int, body: Release, who: RUNNER, db: DB, settings: SETTINGS) -> ResultReply:
    """Give a job back: on shutdown (no error), or because the harness itself failed (error)."""
    with db.read() as session:
        job = session.get(Job, job_id)
        runner_id = job.runner_id if job else None
    if runner_id is None:
        raise queue.LeaseLost(f"job {job_id} is not leased")
    _own_runner(db, who, runner_id)
    if queue.give_back(db, runner_id, job_id, body.lease_token, body.error, body.harness_failed):
        with db.read() as session:
            job = session.get(Job, job_id)
            assert job is not None
            submission_id = job.submission_id
        webhooks.notify(db, submission_id, settings.webhooks_allow_private)
    return ResultReply(accepted=True, duplicate=False)
