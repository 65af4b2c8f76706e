"""The samples page: every sample with its check's verdict and review, and for whoever may
review a sample (as contest reviews are authorised: service/samples.py) a form to accept or
reject it with a comment. The kernels' code is on the sample's submission page, shown as a
submission's code is. The form POST depends on `check_csrf`."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from gpuarena.errors import GpuarenaError
from gpuarena.service import samples
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.sample_schemas import SampleReviewRequest
from gpuarena.service.tables import SampleRow
from gpuarena.service.web.render import page
from gpuarena.service.web.security import check_csrf
from gpuarena.service.web.session import signed_in, viewer

router = APIRouter(include_in_schema=False)
forms = APIRouter(include_in_schema=False, dependencies=[Depends(check_csrf)])
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
SIGNED_IN = Annotated[Caller, Depends(signed_in)]


@router.get("/samples", response_class=HTMLResponse)
def samples_page(request: Request, db: DB, who: WHO, review: str = "") -> HTMLResponse:
    with db.read() as session:
        rows = []
        for listed in samples.listed(session, review=review or None, viewer=who):
            shown = samples.detail(session, listed.id, who)
            sample = session.get(SampleRow, listed.id)
            assert sample is not None  # detail() found it
            rows.append(
                {
                    **shown.model_dump(exclude={"files", "report"}),
                    "report": shown.report,
                    "reviewable": samples.may_review(session, who, sample),
                }
            )
    return page(request, "samples.html", who, rows=rows, review=review, error=request.query_params.get("error", ""))


@forms.post("/samples/{sample_id}/review")
def review_sample(
    sample_id: int, db: DB, who: SIGNED_IN, decision: Annotated[str, Form()], comment: Annotated[str, Form()] = ""
) -> Response:
    """A mistake (accepting a broken sample, not an organizer) comes back on the page."""
    try:
        request = SampleReviewRequest(decision=decision, comment=comment.strip())
        with db.write() as session:
            samples.review(session, who, sample_id, request)
    except (ValueError, GpuarenaError) as exc:
        return RedirectResponse("/samples?error=" + quote(f"sample {sample_id}: {exc}"), status_code=303)
    return RedirectResponse(f"/samples#sample-{sample_id}", status_code=303)
