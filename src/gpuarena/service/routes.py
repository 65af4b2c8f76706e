"""The JSON API for people and their tools: problems, submissions, leaderboards, tokens."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal, cast

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse
from sqlalchemy import bindparam, func, select

import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
from gpuarena import __version__
from gpuarena.contracts.records import Mode
from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.migration.target import is_app, reference_app_toml
from gpuarena.service import auth, holdback, invites, leaderboard, live, submissions, webhooks
from gpuarena.service.catalog import current_problem
from gpuarena.service.config import Settings
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, admin, caller, get_db, get_settings, optional_caller
from gpuarena.service.device_kinds import RUNNER_ONLINE, online_kinds
from gpuarena.service.errors import Forbidden, NotFound, TooLarge
from gpuarena.service.offloop import OffLoopRoute
from gpuarena.service.rights import sees_private
from gpuarena.service.schemas import (
    DeviceKindInfo,
    Health,
    InviteInfo,
    InviteRequest,
    JoinRequest,
    Leaderboard,
    Me,
    NewInvite,
    NewToken,
    NewUser,
    NewWebhook,
    ProblemDetail,
    ProblemSummary,
    RunnerInfo,
    SubmissionDetail,
    SubmissionOut,
    SubmissionRequest,
    TokenInfo,
    TokenRequest,
    WebhookInfo,
    WebhookRequest,
)
from gpuarena.service.tables import (
    DeviceKind,
    Invite,
    Job,
    Problem,
    Runner,
    SolutionBlob,
    Submission,
    Token,
    User,
    Webhook,
    utcnow,
)
from gpuarena.solutions.loader import solution_from_upload

router = APIRouter(prefix="/api", route_class=OffLoopRoute)

DB = Annotated[Database, Depends(get_db)]
SETTINGS = Annotated[Settings, Depends(get_settings)]
CALLER = Annotated[Caller, Depends(caller)]
MAYBE = Annotated[Caller | None, Depends(optional_caller)]


@router.get("/health", tags=["service"])
def health(db: DB) -> Health:
    """Liveness and queue depth; needs no token."""
    with db.read() as session:
        counts = dict(
            session.execute(
                select(Job.state, func.count()).where(Job.state.in_(("queued", "leased"))).group_by(Job.state)
            ).all()
        )
    return Health(
        status="ok",
        version=__version__,
        database=db.dialect,
        queued=counts.get("queued", 0),
        running=counts.get("leased", 0),
    )


@router.get("/me", tags=["accounts"])
def me(who: CALLER) -> Me:
    return Me(name=who.name, role=who.role)


def _summary(p: Problem) -> dict:
    return dict(
        id=p.slug,
        name=p.name,
        level=p.level,
        weight=p.weight,
        summary=p.summary,
        tags=p.spec.get("tags", []),
        version=p.version,
        workloads=[w["name"] for w in p.spec["workloads"]],
        kind="app" if is_app(p.spec) else "kernel",
    )


@router.get("/problems", tags=["problems"])
def list_problems(db: DB, kind: Literal["kernel", "app"] | None = None) -> list[ProblemSummary]:
    """Current problems; kind=app lists the migration targets only, kind=kernel the others."""
    with db.read() as session:
        rows = session.scalars(
            select(Problem).where(Problem.current, Problem.slug != SAMPLES_SLUG).order_by(Problem.level, Problem.slug)
        )
        found = [ProblemSummary(**_summary(p)) for p in rows]
        return [p for p in found if kind is None or p.kind == kind]


@router.get("/problems/{problem_id:path}", tags=["problems"])
def get_problem(problem_id: str, db: DB) -> ProblemDetail:
    with db.read() as session:
        p = current_problem(session, problem_id)
        if p is None:
            raise NotFound(f"unknown problem {problem_id!r} (GET /api/problems lists them)")
        if is_app(p.spec):  # a golden folder's files are base64; its reference is the app.toml ports are held to
            return ProblemDetail(
                **_summary(p),
                spec=p.spec,
                readme="",
                reference=reference_app_toml(p.files),
                solutions_public=p.solutions_public,
            )
        return ProblemDetail(
            **_summary(p),
            spec=p.spec,
            readme=p.files.get("README.md", ""),
            reference=p.files.get("reference.py", ""),
            solutions_public=p.solutions_public,
        )


@router.get("/device-kinds", tags=["runners"])
def device_kinds(db: DB) -> list[DeviceKindInfo]:
    """Device kinds that runners have brought, with runners online and jobs waiting."""
    with db.read() as session:
        online = online_kinds(session)
        queued = dict(
            session.execute(
                select(Job.device_kind, func.count()).where(Job.state == "queued").group_by(Job.device_kind)
            ).all()
        )
        return [
            DeviceKindInfo(name=name, runners_online=online.get(name, 0), queued=queued.get(name, 0))
            for name in session.scalars(select(DeviceKind.name).order_by(DeviceKind.name))
        ]


@router.get("/runners", tags=["runners"])
def list_runners(who: CALLER, db: DB) -> list[RunnerInfo]:
    """Runners, their device slots (drained ones with the reason) and the jobs they hold. A
    runner's hostname is shown only to admins and to the account it runs as: the machines
    of a contest are nobody else's business (and an address to aim at)."""
    with db.read() as session:
        running: dict[int | None, list[int]] = {}
        for job_id, runner_id in session.execute(select(Job.id, Job.runner_id).where(Job.state == "leased")):
            running.setdefault(runner_id, []).append(job_id)
        online_since = utcnow() - RUNNER_ONLINE
        return [
            RunnerInfo(
                id=r.id,
                name=r.name,
                account=cast(User, session.get(User, r.user_id)).name,  # a runner's account exists (foreign key)
                hostname=r.hostname if who.role == "admin" or who.user_id == r.user_id else "",
                version=r.version,
                online=r.last_seen_at > online_since,
                device_kinds=r.device_kinds or [],
                devices=r.devices or [],
                running=sorted(running.get(r.id, [])),
                jobs_done=r.jobs_done,
                last_seen_at=r.last_seen_at,
            )
            for r in session.scalars(select(Runner).order_by(Runner.id))
        ]


@router.post("/submissions", status_code=201, tags=["submissions"])
def submit(request: SubmissionRequest, who: CALLER, db: DB, settings: SETTINGS) -> SubmissionOut:
    """Queue a solution (JSON: a packed solution, or name, manifest and sources)."""
    return submissions.create(db, settings, who, request)


@router.post("/submissions/upload", status_code=201, tags=["submissions"])
async def submit_upload(
    who: CALLER,
    db: DB,
    settings: SETTINGS,
    file: Annotated[UploadFile, File(description="solve() in a .py file, or a pack (.json)")],
    problem: Annotated[str, Form()],
    device_kind: Annotated[str, Form()],
    mode: Annotated[Mode, Form()] = "ranked",
) -> SubmissionOut:
    """Queue a solution uploaded as a file (multipart form)."""
    data = await file.read(settings.max_request_bytes + 1)
    if len(data) > settings.max_request_bytes:
        raise TooLarge(f"{file.filename}: larger than {settings.max_request_bytes} bytes")
    solution = solution_from_upload(file.filename or "solution.py", data)
    request = SubmissionRequest(problem=problem, device_kind=device_kind, mode=mode, solution=solution)
    return await run_in_threadpool(submissions.create, db, settings, who, request)


@router.get("/submissions", tags=["submissions"])
def list_submissions(
    db: DB,
    who: MAYBE,
    user: str | None = None,
    problem: str | None = None,
    device_kind: str | None = None,
    status: str | None = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ids: Annotated[
        str | None, Query(description="Only these submissions: comma-separated ids", pattern=r"^\d+(,\d+)*$")
    ] = None,
) -> list[SubmissionOut]:
    """Submissions, newest first: by user, problem, device kind and status (QUEUED, PASSED, ...).
    A contest entry made during its contest's freeze is listed as HELD, without its result, to
    all but its author, the contest's organisers and admins until the contest ends."""
    with db.read() as session:
        return submissions.search(
            session,
            user,
            problem,
            device_kind,
            status,
            limit,
            [int(i) for i in ids.split(",")] if ids else None,
            viewer=who,
        )


@router.get("/submissions/{submission_id}", tags=["submissions"])
def get_submission(submission_id: int, db: DB, who: MAYBE) -> SubmissionDetail:
    """Status, and once finished the Evaluation record; needs no token. The record's log is the
    author's, organisers' and admins' (everyone's once the problem's solutions are public)."""
    return submissions.detail(db, submission_id, who)


@router.post("/submissions/{submission_id}/cancel", tags=["submissions"])
def cancel_submission(submission_id: int, who: CALLER, db: DB, settings: SETTINGS) -> SubmissionOut:
    """Cancel a queued or running submission (its author or an admin): a queued job leaves the
    queue, a running one is stopped by its runner within a few seconds; it ends CANCELLED."""
    cancelled = submissions.cancel(db, who, submission_id)
    webhooks.notify(db, submission_id, settings.webhooks_allow_private)
    return cancelled


@router.get("/submissions/{submission_id}/code", tags=["submissions"])
def get_code(submission_id: int, who: CALLER, db: DB) -> dict[str, str]:
    """The sources: for the author, admins, the problem's owner, the organisers of a contest the
    submission was entered in, and everyone once the problem's solutions are public (rights.py)."""
    with db.read() as session:
        s = session.get(Submission, submission_id)
        if s is None:
            raise NotFound(f"no submission {submission_id}")
        if not sees_private(session, who, s):
            raise Forbidden(
                "only the author, admins, the problem's owner and the organisers of a contest it was entered in "
                "see this code until the problem's solutions are public"
            )
        blob = session.get(SolutionBlob, s.solution_hash)
        assert blob is not None
        return dict(blob.sources)


@router.get(
    "/submissions/{submission_id}/events",
    tags=["submissions"],
    response_description="text/event-stream: `status` events with the submission, then `done`",
)
async def submission_events(submission_id: int, request: Request, db: DB, who: MAYBE) -> StreamingResponse:
    """Server-sent events: the submission each time its status or queue position changes, until it is done.
    One poller serves every open stream (live.py); a client holds at most a few streams at once
    and the server a few hundred: beyond that a stream is refused with 429 or 503 (poll this
    submission instead)."""
    streams: live.Streams = request.app.state.streams
    client = f"user:{who.user_id}" if who is not None else f"address:{request.client.host if request.client else ''}"
    release = streams.admit(client)  # refused before it reads anything
    try:
        first = await run_in_threadpool(submissions.detail, db, submission_id, who)  # 404 before the stream starts
    except BaseException:
        release()
        raise
    return StreamingResponse(
        streams.stream(first, who, release, request.is_disconnected),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store"},
    )


_CURRENT_VERSION = select(Problem.id, Problem.slug, Problem.version).where(
    Problem.slug == bindparam("slug"), Problem.current
)


@router.get("/leaderboard", tags=["leaderboards"], response_model=Leaderboard)
def get_leaderboard(
    db: DB, who: MAYBE, problem: str, device_kind: str, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> Response:
    """Each user's best ranked, passing submission on one problem and device kind. A result held
    by a contest's freeze counts once the contest ends (before, for its author and the contest's
    organisers and admins only)."""
    leaderboard.release_due(db)
    with db.read() as session:
        p = session.connection().execute(_CURRENT_VERSION, {"slug": problem}).first()  # not the problem's files
        if p is None:
            raise NotFound(f"unknown problem {problem!r}")
        rows = leaderboard.read_rows(session, p.id, device_kind, limit, holdback.scope(session, who))
    board = Leaderboard.model_validate(
        {
            "problem": p.slug,
            "problem_version": p.version,
            "device_kind": device_kind,
            "rows": [
                {"rank": i + 1, "user": name, "score": score, "submission_id": sid, "achieved_at": at}
                for i, (score, sid, at, name, *_) in enumerate(rows)
            ],
        }
    )
    # validated once, in one call; returned as JSON directly (FastAPI would validate and convert it twice more)
    return Response(board.model_dump_json(), media_type="application/json")


def token_info(t: Token) -> TokenInfo:
    """What the API and the tokens page show of a token (never its hash)."""
    return TokenInfo(
        id=t.id,
        name=t.name,
        prefix=t.prefix,
        created_at=t.created_at,
        expires_at=t.expires_at,
        revoked_at=t.revoked_at,
        last_used_at=t.last_used_at,
        device_kinds=t.device_kinds,
    )


@router.get("/tokens", tags=["accounts"])
def list_tokens(who: CALLER, db: DB) -> list[TokenInfo]:
    with db.read() as session:
        return [
            token_info(t) for t in session.scalars(select(Token).where(Token.user_id == who.user_id).order_by(Token.id))
        ]


@router.post("/tokens", status_code=201, tags=["accounts"])
def create_token(request: TokenRequest, who: CALLER, db: DB) -> NewToken:
    with db.write() as session:
        user = auth.user_by_name(session, who.name)
        expires = dt.timedelta(days=request.expires_in_days) if request.expires_in_days else None
        token, plain = auth.issue_token(
            session,
            user,
            request.name,
            expires,
            device_kinds=(list(who.device_kinds) if who.device_kinds is not None else None),
        )
        return NewToken(token=plain, info=token_info(token))


def invite_info(i: Invite) -> InviteInfo:
    return InviteInfo(
        id=i.id,
        prefix=i.prefix,
        role=i.role,
        uses_left=i.uses_left,
        note=i.note,
        created_at=i.created_at,
        expires_at=i.expires_at,
        revoked_at=i.revoked_at,
    )


@router.post("/invites", status_code=201, tags=["accounts"])
def create_invite(body: InviteRequest, request: Request, who: CALLER, db: DB) -> NewInvite:
    """A sign-up link (organisers, admins): whoever opens it picks a name and gets an account."""
    with db.write() as session:
        invite, code = invites.create(session, who, body.role, body.uses, body.expires_in_days, body.note)
        return NewInvite(code=code, link=str(request.base_url).rstrip("/") + f"/join/{code}", info=invite_info(invite))


@router.get("/invites", tags=["accounts"])
def list_invites(who: CALLER, db: DB) -> list[InviteInfo]:
    with db.read() as session:
        return [invite_info(i) for i in invites.listed(session, who)]


@router.delete("/invites/{invite_id}", tags=["accounts"])
def revoke_invite(invite_id: int, who: CALLER, db: DB) -> InviteInfo:
    with db.write() as session:
        return invite_info(invites.revoke(session, who, invite_id))


def webhook_info(h: Webhook) -> WebhookInfo:
    return WebhookInfo(
        id=h.id, url=h.url, created_at=h.created_at, last_called_at=h.last_called_at, last_status=h.last_status
    )


@router.post("/webhooks", status_code=201, tags=["accounts"])
def create_webhook(body: WebhookRequest, who: CALLER, db: DB, settings: SETTINGS) -> NewWebhook:
    """A URL told (POST, signed JSON) whenever one of your submissions finishes."""
    hook, secret = webhooks.create(db, who, body.url, settings.webhooks_allow_private)
    return NewWebhook(secret=secret, info=webhook_info(hook))


@router.get("/webhooks", tags=["accounts"])
def list_webhooks(who: CALLER, db: DB) -> list[WebhookInfo]:
    return [webhook_info(h) for h in webhooks.listed(db, who)]


@router.delete("/webhooks/{hook_id}", status_code=204, tags=["accounts"])
def delete_webhook(hook_id: int, who: CALLER, db: DB) -> Response:
    webhooks.delete(db, who, hook_id)
    return Response(status_code=204)


@router.post("/join", status_code=201, tags=["accounts"])
def join(body: JoinRequest, db: DB) -> NewToken:
    """Use an invite: a new account and its first token (shown once); needs no token."""
    with db.write() as session:
        user, plain = invites.accept(session, body.code, body.name)
        token = session.scalar(select(Token).where(Token.user_id == user.id))
        assert token is not None
        return NewToken(token=plain, info=token_info(token))


@router.delete("/tokens/{token_id}", tags=["accounts"])
def revoke_token(token_id: int, who: CALLER, db: DB) -> TokenInfo:
    with db.write() as session:
        owner = None if who.role == "admin" else auth.user_by_name(session, who.name)
        return token_info(auth.revoke_token(session, token_id, owner))


@router.post("/users", status_code=201, tags=["accounts"])
def create_user(request: NewUser, _: Annotated[Caller, Depends(admin)], db: DB) -> NewToken:
    """Admins: create an account and its first token."""
    with db.write() as session:
        user = auth.add_user(session, request.name, request.role)
        token, plain = auth.issue_token(session, user, "first")
        return NewToken(token=plain, info=token_info(token))
