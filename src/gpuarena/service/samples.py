"""Dataset samples in the service: a sample is recorded in the transaction that queues its check
(a submission to the samples problem, dataset/sample_pack.py), its report is stored in the one
that accepts the check's result, and organizers review it. Accepting a sample entered in a
ccf-dataset contest writes the entry's figures (one accepted sample, its score), so the
standings count it without anyone typing numbers; accepted samples are the dataset
`gpuarena dataset pull` downloads.

A sample entered in a contest during its freeze is held as any entry is (holdback.py): to anyone
but its contributor, the contest's organisers and admins it is listed with status "held", no
score, report or files, and its review as pending, it is found by no status or review filter
but "pending", and it joins the public dataset only when the contest ends."""

from __future__ import annotations

import datetime as dt
from typing import cast

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from gpuarena.contracts.packed import PackedProblem
from gpuarena.contracts.records import Evaluation
from gpuarena.dataset.pull import DatasetSample
from gpuarena.dataset.sample import SampleReport
from gpuarena.dataset.sample_pack import inspect_solution, pack_dataset, problem_files
from gpuarena.errors import GpuarenaError
from gpuarena.service import contests, holdback
from gpuarena.service.contest_schemas import ReviewRequest
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.redact import redact_json
from gpuarena.service.rights import sees_private
from gpuarena.service.sample_schemas import SampleDetail, SampleOut, SampleReviewRequest, SampleStatus
from gpuarena.service.tables import ContestEntry, ContestRow, SampleRow, SolutionBlob, Submission, User, utcnow
from gpuarena.solutions.model import Solution

DATASET_PREFIX = "samples/"
"""How a check names an accepted sample it repeats: samples/<id>."""


def on_submission(session: Session, who: Caller, submission: Submission, solution: Solution) -> SampleRow:
    """Record a just-queued sample, or refuse it (the caller's transaction rolls back): its
    sample.toml and parts are checked here, without running anything, and its contributor
    must be the account that submits it (contests count the submitter)."""
    info = inspect_solution(solution)
    if info.manifest.contributor != who.name:
        raise GpuarenaError(
            f"sample.toml says contributor = {info.manifest.contributor!r}, but you are {who.name!r}: "
            f'a sample is submitted by its contributor (fix: contributor = "{who.name}")'
        )
    row = SampleRow(
        submission_id=submission.id,
        user_id=who.user_id,
        contributor=info.manifest.contributor,
        llm=info.manifest.llm,
        problem=info.problem[:200],
        review="pending",
        review_comment="",
    )
    session.add(row)
    return row


def on_result(
    session: Session,
    submission: Submission,
    evaluation: Evaluation,
    report: SampleReport | None,
    hostnames: list[str | None],
) -> None:
    """Store a sample's check (nothing for other submissions). A runner that sent no report
    leaves the sample broken, saying so."""
    row = session.get(SampleRow, submission.id)
    if row is None:
        return
    if report is None:
        report = SampleReport(
            sample=row.problem,
            device=evaluation.device,
            verdict="broken",
            errors=[f"the runner sent no sample report ({evaluation.status.value}: {evaluation.reason})"],
        )
    report = SampleReport.model_validate(redact_json(report.model_dump(mode="json"), hostnames))
    row.verdict, row.report, row.checked_at = report.verdict, report.model_dump(mode="json"), utcnow()
    row.score = report.score  # over the canonical reference, not the contributor's alone (sample_score.py)
    row.problem = (report.problem or row.problem)[:200]


def _contest(session: Session, sample_id: int) -> ContestRow | None:
    entry = session.get(ContestEntry, sample_id)
    return session.get(ContestRow, entry.contest_id) if entry is not None else None


def may_review(session: Session, who: Caller | None, row: SampleRow) -> bool:
    """As contest reviews: a sample entered in a contest by that contest's organizers (and
    admins); any other by organisers and admins."""
    if who is None:
        return False
    contest = _contest(session, row.submission_id)
    return contests.is_organizer(session, contest, who) if contest is not None else who.is_staff


def _get(session: Session, sample_id: int) -> SampleRow:
    row = session.get(SampleRow, sample_id)
    if row is None:
        raise NotFound(f"no sample {sample_id} (GET /api/samples lists them)")
    return row


def review(session: Session, who: Caller, sample_id: int, request: SampleReviewRequest) -> SampleRow:
    """An organizer's decision; only a sample whose check was ok can be accepted. In a contest
    the entry gets the decision too, with the figures ccf-dataset reads."""
    row = _get(session, sample_id)
    contest = _contest(session, sample_id)
    if not may_review(session, who, row):
        who_may = (
            f"the organizers of {contest.slug} ({', '.join(contests.organizer_names(session, contest.id))})"
            if contest is not None
            else "organisers and admins"
        )
        raise Forbidden(f"{who.name} may not review sample {sample_id}: only {who_may} may")
    if request.decision == "accepted" and row.verdict != "ok":
        why = {"duplicate": "its problem is already in the dataset", "broken": "its check failed"}.get(
            row.verdict or "", "it has not been checked yet"
        )
        raise GpuarenaError(
            f"sample {sample_id} is {_status(row, session)}: only a sample whose check was ok can be accepted ({why})"
        )
    row.review, row.review_comment = request.decision, request.comment
    row.reviewer_id, row.reviewed_at = who.user_id, utcnow()
    if contest is not None:
        accepted = request.decision == "accepted"
        entry = session.get(ContestEntry, sample_id)
        assert entry is not None
        contests.record_review(
            session,
            entry,
            who,
            ReviewRequest(
                decision=request.decision,
                comment=request.comment,
                samples_accepted=int(accepted),
                samples_score=(row.score or 0.0) if accepted else 0.0,
            ),
        )
    session.flush()
    return row


_CHECKING: dict[str, SampleStatus] = {"QUEUED": "queued", "RUNNING": "checking", "CANCELLED": "cancelled"}


def _status(row: SampleRow, session: Session, submission_status: str | None = None) -> SampleStatus:
    if row.verdict is not None:
        return cast(SampleStatus, row.verdict)  # a SampleReport's verdict (on_result writes it)
    if submission_status is None:
        submission_status = session.scalar(select(Submission.status).where(Submission.id == row.submission_id))
    return _CHECKING.get(submission_status or "", "error")


def _out(session: Session, row: SampleRow, submission: Submission, names: dict[int, str], held: bool) -> SampleOut:
    """The sample as listed; held: its result is held from this viewer by a contest's freeze
    (its check, score and review show when the contest ends)."""
    contest = _contest(session, row.submission_id)
    shown = SampleOut(
        id=row.submission_id,
        user=names.get(row.user_id, "?"),
        contributor=row.contributor,
        llm=row.llm,
        problem=row.problem,
        device_kind=submission.device_kind,
        contest=contest.slug if contest is not None else None,
        status=_status(row, session, submission.status),
        score=row.score,
        review=row.review,
        review_comment=row.review_comment,
        reviewer=names.get(row.reviewer_id) if row.reviewer_id is not None else None,
        created_at=row.created_at,
        checked_at=row.checked_at,
        reviewed_at=row.reviewed_at,
        held_until=submission.held_until if holdback.is_held(submission.held_until, utcnow()) else None,
    )
    if held:
        return shown.model_copy(
            update=dict(
                status="held",
                score=None,
                review="pending",
                review_comment="",
                reviewer=None,
                checked_at=None,
                reviewed_at=None,
            )
        )
    return shown


def _names(session: Session, rows: list[SampleRow]) -> dict[int, str]:
    ids = {r.user_id for r in rows} | {r.reviewer_id for r in rows if r.reviewer_id is not None}
    return dict(session.execute(select(User.id, User.name).where(User.id.in_(ids))).all()) if ids else {}


def listed(
    session: Session,
    review: str | None = None,
    user: str | None = None,
    status: str | None = None,
    limit: int = 200,
    viewer: Caller | None = None,
) -> list[SampleOut]:
    """Samples, newest first, as `viewer` (None: anonymous) may see them; anyone may list them
    (what is private is in their files). The filters read what the viewer sees: a held sample
    is found by no status filter and by no review filter but "pending"."""
    now = utcnow()
    query = (
        select(SampleRow, Submission)
        .join(Submission, Submission.id == SampleRow.submission_id)
        .order_by(SampleRow.submission_id.desc())
    )
    if review:  # and the held ones, which may be listed as pending to this viewer
        query = query.where(or_(SampleRow.review == review, Submission.held_until > now))
    if user:
        query = query.join(User, User.id == SampleRow.user_id).where(User.name == user)
    pairs = list(session.execute(query).all())
    names = _names(session, [r for r, _ in pairs])
    held = holdback.hidden(session, holdback.scope(session, viewer), [s for _, s in pairs], now)
    found = [_out(session, row, submission, names, submission.id in held) for row, submission in pairs]
    return [s for s in found if (status is None or s.status == status) and (review is None or s.review == review)][
        :limit
    ]


def detail(session: Session, sample_id: int, viewer: Caller | None) -> SampleDetail:
    """One sample as `viewer` (None: anonymous) may see it: its files as its submission's code,
    and nothing of its check while a contest's freeze holds it from them."""
    row = _get(session, sample_id)
    submission = session.get(Submission, sample_id)
    assert submission is not None
    held = bool(holdback.hidden(session, holdback.scope(session, viewer), [submission], utcnow()))
    visible = sees_private(session, viewer, submission) and not held  # the files hold the report
    blob = session.get(SolutionBlob, submission.solution_hash) if visible else None
    out = _out(session, row, submission, _names(session, [row]), held)
    return SampleDetail(
        **out.model_dump(),
        report=SampleReport.model_validate(row.report) if row.report and not held else None,
        files=dict(blob.sources) if blob is not None else None,
        files_hidden=not visible,
    )


def accepted(session: Session, held_too: bool = False, now: dt.datetime | None = None) -> list[DatasetSample]:
    """The accepted samples' problems, oldest first: the service's part of the dataset. A sample
    a contest's freeze holds joins it when the contest ends (held_too: now, for the duplicate
    check of new samples)."""
    query = (
        select(SampleRow, SolutionBlob)
        .join(Submission, Submission.id == SampleRow.submission_id)
        .join(SolutionBlob, SolutionBlob.hash == Submission.solution_hash)
        .where(SampleRow.review == "accepted")
        .order_by(SampleRow.submission_id)
    )
    if not held_too:
        query = query.where(or_(Submission.held_until.is_(None), Submission.held_until <= (now or utcnow())))
    pairs = list(session.execute(query).all())
    names = _names(session, [r for r, _ in pairs])
    return [
        DatasetSample(
            id=row.submission_id,
            contributor=row.contributor,
            llm=row.llm,
            problem=row.problem,
            score=row.score,
            reviewer=names.get(row.reviewer_id) if row.reviewer_id else None,
            files=problem_files(Solution(name=blob.name, manifest=blob.manifest, sources=blob.sources)),
        )
        for row, blob in pairs
    ]


def packed_dataset(session: Session) -> PackedProblem:
    """The accepted samples' problems as one root (samples/<id>), sent with each sample's check
    so that a sample repeating an accepted one is a duplicate (a held one too: the dataset's
    integrity comes first)."""
    return pack_dataset({f"{DATASET_PREFIX}{s.id}": s.files for s in accepted(session, held_too=True)})
