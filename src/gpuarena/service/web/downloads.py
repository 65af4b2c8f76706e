"""Downloads from the web pages: a leaderboard and a user's results as CSV or JSON, and a
submission's record as JSON (what the viewer may see of it, as on its page)."""

from __future__ import annotations

import csv
import io
import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from sqlalchemy import select

from gpuarena.service import holdback, leaderboard
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller, get_db
from gpuarena.service.submissions import detail, search
from gpuarena.service.tables import Problem
from gpuarena.service.web import views
from gpuarena.service.web.session import viewer
from gpuarena.service.web.views import PageNotFound

router = APIRouter(include_in_schema=False)
DB = Annotated[Database, Depends(get_db)]
WHO = Annotated[Caller | None, Depends(viewer)]
Format = Literal["csv", "json"]


BOARD_FIELDS = ["rank", "user", "score", "score_low", "score_high", "tied_with_above", "submission_id", "achieved_at"]
RESULT_FIELDS = [
    "id",
    "problem",
    "problem_version",
    "device_kind",
    "mode",
    "status",
    "score",
    "reason",
    "created_at",
    "finished_at",
]


def _file(rows: list[dict[str, Any]], name: str, fmt: Format, fields: list[str]) -> Response:
    if fmt == "json":
        body, media = json.dumps(rows, indent=2, default=str) + "\n", "application/json"
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        body, media = out.getvalue(), "text/csv; charset=utf-8"
    return Response(body, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}.{fmt}"'})


@router.get("/leaderboard.{fmt}")
def leaderboard_file(fmt: Format, problem: str, device_kind: str, db: DB, who: WHO) -> Response:
    """Every entry of one leaderboard, with its 95% interval and whether it is tied with the one
    above (a result held by a contest's freeze only where this viewer may see it)."""
    leaderboard.release_due(db)
    with db.read() as session:
        problem_id = session.scalar(select(Problem.id).where(Problem.slug == problem, Problem.current))
        if problem_id is None:
            raise PageNotFound(f"there is no problem {problem!r}")
        board = views.board(session, problem_id, device_kind, limit=10_000, who=holdback.scope(session, who))
    rows = [
        {
            "rank": r.rank,
            "user": r.user,
            "score": r.score,
            "score_low": r.interval[0] if r.interval else None,
            "score_high": r.interval[1] if r.interval else None,
            "tied_with_above": r.tied,
            "submission_id": r.submission_id,
            "achieved_at": r.achieved_at.isoformat(),
        }
        for r in board
    ]
    return _file(rows, f"leaderboard-{problem.replace('/', '-')}-{device_kind}", fmt, BOARD_FIELDS)


@router.get("/results.{fmt}")
def results_file(fmt: Format, user: str, db: DB, who: WHO) -> Response:
    """A user's submissions (newest first, up to 10,000): status, score and when."""
    with db.read() as session:
        found = search(session, user=user, limit=10_000, viewer=who)
    rows = [
        {
            "id": s.id,
            "problem": s.problem,
            "problem_version": s.problem_version,
            "device_kind": s.device_kind,
            "mode": s.mode,
            "status": s.status,
            "score": s.score,
            "reason": s.reason,
            "created_at": s.created_at.isoformat(),
            "finished_at": s.finished_at.isoformat() if s.finished_at else None,
        }
        for s in found
    ]
    return _file(rows, f"results-{user}", fmt, RESULT_FIELDS)


@router.get("/submissions/{submission_id}/record.json")
def record_file(submission_id: int, db: DB, who: WHO) -> Response:
    """The submission and its Evaluation record, as its page shows them to this viewer (the log
    only to those who may read it)."""
    shown = detail(db, submission_id, who)
    return Response(
        shown.model_dump_json(indent=2),
        media_type="application/json",
        headers={"Content-Disposition": f'attachment; filename="submission-{submission_id}.json"'},
    )
