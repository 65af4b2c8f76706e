"""The samples API: list samples and see one (its check's report; its files for whom a
submission's code is shown), the organizers' review, and the accepted samples' problems (the
dataset `gpuarena dataset pull` downloads). A sample is submitted as a submission to the
problem "samples" (POST /api/submissions; `gpuarena sample submit DIR`)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query

from gpuarena.dataset.pull import DatasetSample
from gpuarena.service import samples
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, caller, get_db, optional_caller
from gpuarena.service.offloop import OffLoopRoute
from gpuarena.service.sample_schemas import SampleDetail, SampleOut, SampleReviewRequest, SampleStatus

router = APIRouter(prefix="/api/samples", tags=["samples"], route_class=OffLoopRoute)
DB = Annotated[Database, Depends(get_db)]
CALLER = Annotated[Caller, Depends(caller)]
MAYBE = Annotated[Caller | None, Depends(optional_caller)]


@router.get("")
def list_samples(
    db: DB,
    review: Literal["pending", "accepted", "rejected"] | None = None,
    user: str | None = None,
    status: SampleStatus | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 200,
    who: MAYBE = None,
) -> list[SampleOut]:
    """Samples newest first, with their check's verdict and review (the review queue:
    `status=ok&review=pending`); a sample a contest's freeze holds from the caller is listed as
    held (service/holdback.py)."""
    with db.read() as session:
        return samples.listed(session, review, user, status, limit, who)


@router.get("/dataset")
def dataset(db: DB) -> list[DatasetSample]:
    """The accepted samples' problems (not their kernels), oldest first."""
    with db.read() as session:
        return samples.accepted(session)


@router.get("/{sample_id}")
def get_sample(sample_id: int, db: DB, who: MAYBE) -> SampleDetail:
    with db.read() as session:
        return samples.detail(session, sample_id, who)


@router.post("/{sample_id}/review")
def review_sample(sample_id: int, body: SampleReviewRequest, who: CALLER, db: DB) -> SampleDetail:
    """Accept or reject a checked sample with a comment the contributor sees: a contest's
    organizers for a sample entered in it, organisers and admins for the others."""
    with db.write() as session:
        samples.review(session, who, sample_id, body)
        return samples.detail(session, sample_id, who)
