"""Problems in the database, synced from folders: a changed folder becomes a new version."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from gpuarena.contracts.packed import PackedProblem
from gpuarena.dataset.sample_pack import samples_problem
from gpuarena.migration.target import discover_goldens, pack_golden, target_spec
from gpuarena.problems.loader import discover
from gpuarena.problems.pack import pack_problem
from gpuarena.service.db import Database
from gpuarena.service.tables import Problem


def sync_problems(db: Database, roots: list[Path]) -> list[str]:
    """Load every problem under roots into the database; returns the slugs synced.

    Unchanged folders cost a read; a Markdown-only change updates the current version in
    place; any other change adds a version (the leaderboard restarts with it). Golden folders
    (`gpuarena app record`'s) under the roots are migration targets: problems of kind "app".
    The samples problem (dataset/sample_pack.py) is always there."""
    synced: list[str] = []
    for root in roots:
        for problem in discover(root):
            _sync_one(db, pack_problem(problem), problem.spec.model_dump(mode="json"))
            synced.append(problem.id)
        for slug, folder in discover_goldens(root):
            _sync_one(db, pack_golden(slug, folder), target_spec(slug, folder))
            synced.append(slug)
    _sync_one(db, *samples_problem())  # where dataset samples are submitted (not listed with the problems)
    return synced


def _sync_one(db: Database, packed: PackedProblem, spec: dict) -> None:
    for _attempt in range(3):
        try:
            with db.write() as session:
                latest = session.scalar(
                    select(Problem).where(Problem.slug == packed.id).order_by(Problem.version.desc()).limit(1)
                )
                if latest is not None and latest.content_hash == packed.hash:
                    if latest.files != packed.files:
                        latest.files = dict(packed.files)
                    return
                if latest is not None:
                    for old in session.scalars(select(Problem).where(Problem.slug == packed.id, Problem.current)):
                        old.current = False
                session.add(
                    Problem(
                        slug=packed.id,
                        version=(latest.version + 1) if latest else 1,
                        current=True,
                        content_hash=packed.hash,
                        name=spec["name"],
                        level=spec["level"],
                        weight=spec["weight"],
                        summary=spec.get("summary", ""),
                        spec=spec,
                        files=dict(packed.files),
                        secret_seed=0,  # unused: every ranked job draws its own (Job.seed)
                        owner_id=latest.owner_id if latest else None,  # owner and openness stay with the slug
                        solutions_public=latest.solutions_public if latest else False,
                    )
                )
            return
        except IntegrityError:
            continue  # another server synced the same folder at the same moment; look again


def current_problem(session: Session, slug: str) -> Problem | None:
    return session.scalar(select(Problem).where(Problem.slug == slug, Problem.current))
