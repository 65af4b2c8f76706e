"""Who may see and change what, per contest, problem and submission: never a global organiser
role. An organiser of one contest read the code and logs of another contest's entries and could
open another problem's solutions to anonymous visitors, because visibility checked the role."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuarena.service.deps import Caller
from gpuarena.service.tables import ContestEntry, ContestOrganizer, Problem, Submission


def sees_private(session: Session, viewer: Caller | None, submission: Submission) -> bool:
    """Who sees what a submission keeps private (its code, its log): everyone once its
    problem's solutions are public; else its author, admins, the problem's owner, and the
    organisers of a contest it was entered in."""
    if submission.problem.solutions_public:
        return True
    if viewer is None:
        return False
    if viewer.role == "admin" or viewer.user_id in (submission.user_id, submission.problem.owner_id):
        return True
    organises = (
        select(ContestOrganizer.user_id)
        .join(ContestEntry, ContestEntry.contest_id == ContestOrganizer.contest_id)
        .where(ContestEntry.submission_id == submission.id, ContestOrganizer.user_id == viewer.user_id)
        .limit(1)
    )
    return session.scalar(organises) is not None


def manages_problem(session: Session, who: Caller | None, slug: str) -> bool:
    """Who may open a problem's solutions to everyone: admins and the problem's owner. Not a
    contest's organisers: the switch is the problem's, and opens the entries of every contest
    that has the problem, the contests they do not organise too."""
    if who is None:
        return False
    if who.role == "admin":
        return True
    owner = session.scalar(select(Problem.owner_id).where(Problem.slug == slug, Problem.current))
    return owner is not None and owner == who.user_id
