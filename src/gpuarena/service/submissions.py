"""Accepting a submission: validate everything, then write the code, the submission and its
job in one transaction (all or nothing)."""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, joinedload

from gpuarena.contracts.device import device_type
from gpuarena.contracts.records import Evaluation
from gpuarena.dataset.sample_pack import SAMPLE_LANGUAGE, SAMPLES_SLUG, is_sample
from gpuarena.errors import GpuarenaError
from gpuarena.migration.target import APP_LANGUAGE, is_app
from gpuarena.service import bounties, contests, holdback, queue, ratelimit, samples
from gpuarena.service.config import Settings
from gpuarena.service.db import Database, dialect_insert
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound, TooLarge
from gpuarena.service.public_reason import public_reason
from gpuarena.service.redact import redact, redact_evaluation
from gpuarena.service.rights import sees_private
from gpuarena.service.schemas import SubmissionDetail, SubmissionOut, SubmissionRequest
from gpuarena.service.tables import (
    DeviceKind,
    Job,
    Problem,
    Result,
    Runner,
    SolutionBlob,
    Submission,
    User,
    utcnow,
)
from gpuarena.solutions.model import PackedSolution, Solution

DONE = {
    "PASSED",
    "COMPILE_ERROR",
    "RUNTIME_ERROR",
    "TIMEOUT",
    "WRONG_SHAPE",
    "WRONG_DTYPE",
    "WRONG_VALUES",
    "REJECTED",
    "ERROR",
    "CANCELLED",
}
IN_FLIGHT = ("QUEUED", "RUNNING")


def as_solution(given: Solution | PackedSolution) -> Solution:
    if isinstance(given, Solution):
        return given
    solution = Solution(name=given.name, manifest=given.manifest, sources=given.sources)
    if solution.hash != given.hash:
        raise GpuarenaError(
            f"solution.hash {given.hash[:12]}… does not match its sources ({solution.hash[:12]}…): "
            "the pack was edited; pack it again with `gpuarena pack`"
        )
    return solution


def _repeat(db: Database, who: Caller, request: SubmissionRequest, solution: Solution) -> SubmissionOut | None:
    """The submission an earlier request with the same client_key made, if any."""
    if request.client_key is None:
        return None
    with db.read() as session:
        earlier = session.scalar(
            select(Submission).where(Submission.user_id == who.user_id, Submission.client_key == request.client_key)
        )
        if earlier is None:
            return None
        if (earlier.problem.slug, earlier.device_kind, earlier.mode, earlier.solution_hash) != (
            request.problem,
            request.device_kind,
            request.mode,
            solution.hash,
        ):
            raise GpuarenaError(
                f"client_key {request.client_key!r} was used for submission {earlier.id}, a different "
                "problem, device kind, mode or solution; use a new key for a new submission"
            )
        return to_out(earlier, private=True)


def create(db: Database, settings: Settings, who: Caller, request: SubmissionRequest) -> SubmissionOut:
    solution = as_solution(request.solution)
    size = sum(len(text.encode()) for text in solution.sources.values())
    if size > settings.max_request_bytes:
        raise TooLarge(f"the solution's sources are {size} bytes; the limit is {settings.max_request_bytes}")
    if (earlier := _repeat(db, who, request, solution)) is not None:
        return earlier
    try:
        return _create(db, settings, who, request, solution, size)
    except IntegrityError:
        # the same client_key arrived twice at once (a retry through another server): one won
        if (earlier := _repeat(db, who, request, solution)) is not None:
            return earlier
        raise


_PROBLEM = select(Problem.id, Problem.slug, Problem.version, Problem.spec).where(
    Problem.slug == bindparam("slug"), Problem.current
)
_DEVICE_KIND = select(DeviceKind.name).where(DeviceKind.name == bindparam("name"))


def _create(
    db: Database, settings: Settings, who: Caller, request: SubmissionRequest, solution: Solution, size: int
) -> SubmissionOut:
    with db.write() as session:
        connection = session.connection()  # plain rows: not the problem's files, no ORM bookkeeping
        problem = connection.execute(_PROBLEM, {"slug": request.problem}).first()
        if problem is None:
            raise NotFound(f"unknown problem {request.problem!r} (GET /api/problems lists them)")
        if connection.execute(_DEVICE_KIND, {"name": request.device_kind}).first() is None:
            known = ", ".join(session.scalars(select(DeviceKind.name).order_by(DeviceKind.name))) or "none yet"
            raise GpuarenaError(
                f"unknown device kind {request.device_kind!r} (known: {known}); "
                "a kind becomes known when a runner with that device connects"
            )
        target = device_type(request.device_kind)
        _check_app_pairing(request, problem.spec, solution)
        _check_sample_pairing(request, problem.spec, solution)
        if (
            not is_app(problem.spec)
            and not is_sample(problem.spec)
            and not any(target in w.get("devices", ["cpu", "cuda"]) for w in problem.spec["workloads"])
        ):
            raise GpuarenaError(f"{request.problem} has no workload that runs on {target} devices")
        if solution.manifest.language == "cuda" and target != "cuda":
            raise GpuarenaError(f"a CUDA solution needs a GPU device kind, not {request.device_kind!r}")
        if request.mode == "profile" and target != "cuda":
            raise GpuarenaError(
                f"profile mode runs Nsight Compute on a GPU: choose a GPU device kind, not {request.device_kind!r}"
            )
        if who.role not in ("admin", "runner"):
            _fair_use(session, settings, who)
            ratelimit.take(session, who.user_id, "submissions", settings.submit_limit_per_minute)
        session.execute(
            dialect_insert(session, SolutionBlob)
            .values(
                hash=solution.hash,
                name=solution.name,
                language=solution.manifest.language,
                manifest=solution.manifest.model_dump(mode="json"),
                sources=dict(solution.sources),
                size=size,
            )
            .on_conflict_do_nothing()
        )
        submission = Submission(
            user_id=who.user_id,
            problem_id=problem.id,
            solution_hash=solution.hash,
            device_kind=request.device_kind,
            mode=request.mode,
            status="QUEUED",
            reason="",
            client_key=request.client_key,
        )
        session.add(submission)
        session.flush()
        bounties.on_submission(session, submission)  # a claimer's ranked run submits their speed bounty
        if request.contest is not None:
            contests.enter(session, who, request.contest, submission, problem.slug)
        if is_sample(problem.spec):
            samples.on_submission(session, who, submission, solution)
        queue.enqueue(session, submission, max_attempts=settings.max_attempts)
        return SubmissionOut(
            id=submission.id,
            problem=problem.slug,
            problem_version=problem.version,
            user=who.name,
            device_kind=submission.device_kind,
            mode=submission.mode,
            status=submission.status,
            reason="",
            score=None,
            solution_hash=solution.hash,
            created_at=submission.created_at,
            finished_at=None,
            done=False,
        )


def _check_app_pairing(request: SubmissionRequest, spec: dict, solution: Solution) -> None:
    """A port goes to a migration target and a kernel to a kernel problem, never across; a
    migration check has no profile mode."""
    if is_app(spec) and solution.manifest.language != APP_LANGUAGE:
        raise GpuarenaError(
            f"{request.problem} is a migration target: submit a ported app's folder (with app.toml), "
            f"not a {solution.manifest.language} kernel (docs/migration.md)"
        )
    if not is_app(spec) and solution.manifest.language == APP_LANGUAGE:
        raise GpuarenaError(
            f"{request.problem} is a kernel problem, not a migration target: a ported app goes to a "
            "problem of kind app (GET /api/problems?kind=app lists them)"
        )
    if is_app(spec) and request.mode == "profile":
        raise GpuarenaError("profile mode profiles kernels; a migration check has none: use test, benchmark or ranked")


def _check_sample_pairing(request: SubmissionRequest, spec: dict, solution: Solution) -> None:
    """A dataset sample goes to the samples problem and nothing else does; its check has one mode."""
    sample = solution.manifest.language == SAMPLE_LANGUAGE
    if is_sample(spec) and not sample:
        raise GpuarenaError(
            f"{request.problem} takes dataset samples: submit a sample's folder (with sample.toml) "
            "with `gpuarena sample submit DIR` (docs/dataset.md)"
        )
    if sample and not is_sample(spec):
        raise GpuarenaError(
            f"a dataset sample goes to the problem {SAMPLES_SLUG!r}, not {request.problem!r} "
            "(`gpuarena sample submit DIR`)"
        )
    if sample and request.mode != "ranked":
        raise GpuarenaError(f"a sample's check has one mode: submit it as ranked (the default), not {request.mode}")


def _fair_use(session: Session, settings: Settings, who: Caller) -> None:
    """A user's own share of the runners: at most settings.max_in_flight submissions queued or
    running at once (with the per-minute rate limit, one user cannot fill the queue)."""
    if not settings.max_in_flight:
        return
    # one of the user's submissions at a time from here to the commit: counted and inserted
    # by concurrent transactions, 30 at once were accepted up to 30 times against a cap of 5 on
    # PostgreSQL (SQLite has one writer anyway; FOR UPDATE is nothing there)
    session.execute(select(User.id).where(User.id == who.user_id).with_for_update())
    count = session.scalar(
        select(func.count())
        .select_from(Submission)
        .where(Submission.user_id == who.user_id, Submission.status.in_(IN_FLIGHT))
    )
    assert count is not None  # count() always gives a row
    if count >= settings.max_in_flight:
        raise ratelimit.RateLimited(
            "submissions queued or running at once",
            settings.max_in_flight,
            0,
            30,
            f"you have {count} submissions queued or running; the limit is "
            f"{settings.max_in_flight} (GPUARENA_MAX_IN_FLIGHT): wait for some to finish, "
            "or cancel some (`gpuarena cancel ID`)",
        )


def cancel(db: Database, who: Caller, submission_id: int) -> SubmissionOut:
    """Cancel a submission that has not finished: its author or an admin."""
    with db.write() as session:
        submission = session.get(Submission, submission_id)
        if submission is None:
            raise NotFound(f"no submission {submission_id}")
        if submission.user_id != who.user_id and who.role != "admin":
            raise Forbidden(f"submission {submission_id} is not yours: only its author or an admin can cancel it")
        queue.cancel(session, submission, who.name)
        return to_out(submission, private=True)


def search(
    session: Session,
    user: str | None = None,
    problem: str | None = None,
    device_kind: str | None = None,
    status: str | None = None,
    limit: int = 50,
    ids: list[int] | None = None,
    viewer: Caller | None = None,
) -> list[SubmissionOut]:
    """Submissions, newest first, filtered (the API's list and the web's pages), as `viewer`
    may see them: a result held by a contest's freeze is listed as HELD to those who may not
    see it yet, and found by no status filter (holdback.py). One indexed query whatever the
    number stored (newest first by user, by problem, or overall), with only the columns shown
    of each submission's user and problem (not the problem's files)."""
    from gpuarena.service import auth

    now = utcnow()
    who = holdback.scope(session, viewer)
    query = (
        select(Submission)
        .options(
            joinedload(Submission.problem).load_only(Problem.slug, Problem.version),
            joinedload(Submission.user).load_only(User.name),
        )
        .order_by(Submission.id.desc())
        .limit(limit)
    )
    if ids:
        query = query.where(Submission.id.in_(ids))
    if user:
        query = query.where(Submission.user_id == auth.user_by_name(session, user).id)
    if problem:
        versions = select(Problem.id).where(Problem.slug == problem).scalar_subquery()
        query = query.where(Submission.problem_id.in_(versions))
    if device_kind:
        query = query.where(Submission.device_kind == device_kind)
    if status:
        query = query.where(Submission.status == status.upper(), holdback.result_visible(who, now))
    found = list(session.scalars(query))
    held = holdback.hidden(session, who, found, now)
    return [to_out(s, held=s.id in held) for s in found]


def to_out(s: Submission, private: bool = False, held: bool = False) -> SubmissionOut:
    """A submission as anyone may list it (private: as one who may read its code sees it: the
    reason in full, not public_reason's); the reason is redacted again when shown (it may have
    been stored before the service redacted what it stores). held: its result is held by a
    contest's freeze from this viewer (status HELD, no score, no reason)."""
    if held:
        assert s.held_until is not None
        status, score = holdback.HELD, None
        reason = (
            "a contest entry made during the freeze: its result shows when the contest ends "
            f"({s.held_until:%Y-%m-%d %H:%M} UTC)"
        )
    else:
        status, score = s.status, s.score
        reason = redact(s.reason if private else public_reason(s.status, s.reason))
    return SubmissionOut(
        id=s.id,
        problem=s.problem.slug,
        problem_version=s.problem.version,
        user=s.user.name,
        device_kind=s.device_kind,
        mode=s.mode,
        status=status,
        reason=reason,
        score=score,
        solution_hash=s.solution_hash,
        created_at=s.created_at,
        finished_at=s.finished_at,
        done=s.status in DONE,
        held_until=s.held_until if held or holdback.is_held(s.held_until, utcnow()) else None,
    )


def _public_view(evaluation: Evaluation) -> Evaluation:
    """The record as anyone may see it: status, reasons and timings, without the log (the
    solution's output and tracebacks quote its hidden code), the profile (its kernels' names
    and resources describe the hidden code too) or the host's name; a checked port's report
    without what its runs printed."""
    environment = evaluation.environment.model_copy(update={"hostname": ""}) if evaluation.environment else None
    migration = evaluation.migration
    if migration is not None:
        quiet = [{**run, "stdout_tail": "", "stderr_tail": ""} for run in migration.get("runs") or []]
        migration = {**migration, "runs": quiet}
    workloads = [w.model_copy(update={"reason": public_reason(w.status.value, w.reason)}) for w in evaluation.workloads]
    return evaluation.model_copy(
        update={
            "log": "",
            "environment": environment,
            "profile": None,
            "migration": migration,
            "reason": public_reason(evaluation.status.value, evaluation.reason),
            "workloads": workloads,
        }
    )


def detail(db: Database, submission_id: int, viewer: Caller | None = None) -> SubmissionDetail:
    """A submission as `viewer` (None: anonymous) may see it."""
    with db.read() as session:
        submission = session.get(Submission, submission_id)
        if submission is None:
            raise NotFound(f"no submission {submission_id}")
        result = session.scalar(select(Result).where(Result.submission_id == submission_id))
        job = session.scalar(select(Job).where(Job.submission_id == submission_id))
        runner = session.get(Runner, job.runner_id) if job is not None and job.runner_id is not None else None
        evaluation = Evaluation.model_validate(result.evaluation) if result else None
        hidden = not sees_private(session, viewer, submission)
        held = bool(holdback.hidden(session, holdback.scope(session, viewer), [submission], utcnow()))
        if held:  # the result is held by a contest's freeze: not even the public record
            evaluation = None
        if evaluation is not None:
            # redacted when stored too; again here for records stored before the service did it
            evaluation = redact_evaluation(evaluation, [runner.hostname if runner else None])
            if hidden:
                evaluation = _public_view(evaluation)
        return SubmissionDetail(
            **to_out(submission, private=not hidden, held=held).model_dump(),
            evaluation=evaluation,
            queue_position=queue.queue_position(session, job) if job is not None else None,
            runner=runner.name if runner else None,
            runner_device=(job.device or None) if job is not None and runner else None,
            attempts=job.attempts if job is not None else 0,
            log_hidden=hidden and evaluation is not None,
        )
