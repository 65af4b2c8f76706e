"""The bounty board: rewards for work, speed bounties verified by the harness itself.

A bounty goes open -> claimed (one claimer; the claim lapses back to open after claim_days
unless renewed) -> submitted -> verified -> paid, or ends expired (its deadline passed) or
withdrawn (by an organiser). A speed bounty moves to submitted when its claimer queues a ranked
run on its problem and device kind, and to verified when such a run passes with a score at or
above the bounty's required score; the others are submitted by their claimer and verified by an
organiser. Every change writes a BountyEvent (who, when, from which state to which).

Everything here is a function on a Session inside the caller's transaction: a refused request
raises before anything is committed, so it changes nothing. Time is a `now` parameter (default
`utcnow()`), so tests move it instead of sleeping. Lapsed claims and passed deadlines are
applied lazily by `sweep`, at the start of every change and (through `refresh`) before reads.

A ranked run that is a contest entry made during the contest's freeze has its result held
(holdback.py) until the contest ends: the bounty's history, state and exports are public, so
such a run is not judged when it finishes. Its bounty notes it as "held" (no status, no score)
and keeps the claim (and the deadline) for it, and `sweep` judges it once the hold is over, as
`on_result` would have: only then does it verify the bounty or note that it fell short.

This module holds the people's side: posting a bounty and moving it by hand. The states and
the shared primitives are bounty_changes.py's; ranked runs' side is bounty_runs.py's; time
(`sweep`, `due`, `refresh`) is bounty_sweep.py's. Their public names are re-exported here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from decimal import Decimal, InvalidOperation

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuarena.contracts.device import device_type
from gpuarena.errors import GpuarenaError
from gpuarena.service.bounty_changes import (
    CATEGORIES,
    HELD,
    LIVE,
    MAX_CLAIM_DAYS,
    MAX_SPEEDUP,
    STATES,
    TARGETS,
    change,
    let_go,
    locked,
    target_text,
    user_name,
    when,
)
from gpuarena.service.bounty_runs import HELD_RUN, JUDGED, on_result, on_submission
from gpuarena.service.bounty_schemas import BountyRequest
from gpuarena.service.bounty_sweep import IN_FLIGHT, due, refresh, sweep
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden
from gpuarena.service.leaderboard import read_rows
from gpuarena.service.tables import Bounty, BountyEvent, Problem, utcnow

__all__ = [
    "CATEGORIES",
    "HELD",
    "HELD_RUN",
    "IN_FLIGHT",
    "JUDGED",
    "LIVE",
    "MAX_CLAIM_DAYS",
    "MAX_SPEEDUP",
    "STATES",
    "TARGETS",
    "claim",
    "create",
    "due",
    "on_result",
    "on_submission",
    "pay",
    "refresh",
    "release",
    "renew",
    "reward_amount",
    "submit_work",
    "sweep",
    "target_text",
    "verify",
    "when",
    "withdraw",
]

_CURRENCY = re.compile(r"^[A-Z][A-Z0-9]{1,15}$")


# creating


def reward_amount(text: str) -> str:
    """A positive decimal amount, as canonical text ("1e3" -> "1000"); money is never a float."""
    try:
        amount = Decimal(text.strip())
    except InvalidOperation:
        raise GpuarenaError(
            f'reward_amount {text!r} is not a decimal number (write it as text, e.g. "500" or "12.50")'
        ) from None
    if not amount.is_finite() or amount <= 0:
        raise GpuarenaError(f"reward_amount {text!r}: the reward must be a positive number")
    exponent = amount.as_tuple().exponent
    if isinstance(exponent, int) and exponent < -18:
        raise GpuarenaError(f"reward_amount {text!r}: use at most 18 decimal places")
    canonical = format(amount, "f")
    if len(canonical) > 32:
        raise GpuarenaError(f"reward_amount {text!r}: too large (at most 32 characters written out)")
    return canonical


def _currency(text: str) -> str:
    code = text.strip().upper()
    if not _CURRENCY.match(code):
        raise GpuarenaError(f"currency {text!r}: use a code of 2-16 letters and digits, such as USD, EUR or USDC")
    return code


def _naive_utc(value: dt.datetime) -> dt.datetime:
    """Times are stored as naive UTC: an aware time is converted, a naive one is taken as UTC."""
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def _speed_target(session: Session, request: BountyRequest) -> tuple[str, str, str, float, float, float]:
    """(problem, device kind, target_over, speed-up, baseline score, required score) of a speed
    bounty, each checked: the problem is current and runs on the device kind (which no runner
    need have brought yet: the reply warns of that, `device_kinds.runner_warnings`), the target is a positive speed-up over something that exists."""
    if not request.problem:
        raise GpuarenaError(
            "problem: a speed bounty names a problem, e.g. level1/softmax (GET /api/problems lists them)"
        )
    problem = session.execute(
        select(Problem.id, Problem.slug, Problem.spec).where(Problem.slug == request.problem, Problem.current)
    ).first()
    if problem is None:
        raise GpuarenaError(f"problem: unknown problem {request.problem!r} (GET /api/problems lists them)")
    if not request.device_kind:
        raise GpuarenaError("device_kind: a speed bounty names the device kind its ranked run must use, e.g. H100")
    target = device_type(request.device_kind)
    if not any(target in w.get("devices", ["cpu", "cuda"]) for w in problem.spec["workloads"]):
        raise GpuarenaError(f"device_kind: {problem.slug} has no workload that runs on {target} devices")
    speedup = request.target_speedup
    if speedup is None or not math.isfinite(speedup) or not 0 < speedup <= MAX_SPEEDUP:
        raise GpuarenaError(f"target_speedup: {speedup!r}; a speed bounty needs a speed-up above 0 (e.g. 2 for 2x)")
    over = request.target_over or "reference"
    if over == "reference":
        baseline = 1.0
    else:
        best = read_rows(session, problem.id, request.device_kind, limit=1)
        if not best:
            raise GpuarenaError(
                f"target_over: the leaderboard of {problem.slug} on {request.device_kind} is empty; "
                "target the reference instead"
            )
        baseline = float(best[0][0])
    required = float(f"{speedup * baseline:.12g}")  # 2 x 1.2 is 2.4, not 2.4000000000000004
    return problem.slug, request.device_kind, over, speedup, baseline, required


def create(session: Session, who: Caller, request: BountyRequest, now: dt.datetime | None = None) -> Bounty:
    """Post a bounty (organisers and admins); every field is checked before anything is written."""
    now = now or utcnow()
    if not who.is_staff:
        raise Forbidden(f"{who.name} is a {who.role}; posting a bounty needs an admin or organiser")
    sweep(session, now)
    title = request.title.strip()
    if not title:
        raise GpuarenaError("title: give the bounty a title")
    if request.category not in CATEGORIES:
        raise GpuarenaError(f"category {request.category!r}: use one of {', '.join(CATEGORIES)}")
    if not 1 <= request.claim_days <= MAX_CLAIM_DAYS:
        raise GpuarenaError(f"claim_days {request.claim_days}: a claim holds between 1 and {MAX_CLAIM_DAYS} days")
    deadline = _naive_utc(request.deadline) if request.deadline else None
    if deadline is not None and deadline <= now:
        raise GpuarenaError(f"deadline {when(deadline)} has already passed")
    bounty = Bounty(
        title=title,
        description=request.description,
        reward_amount=reward_amount(request.reward_amount),
        currency=_currency(request.currency),
        category=request.category,
        claim_days=request.claim_days,
        deadline=deadline,
        state="open",
        created_by=who.user_id,
        created_at=now,
    )
    if request.category == "speed":
        (
            bounty.problem_slug,
            bounty.device_kind,
            bounty.target_over,
            bounty.target_speedup,
            bounty.baseline_score,
            bounty.required_score,
        ) = _speed_target(session, request)
    else:
        given = [
            name
            for name in ("problem", "device_kind", "target_over", "target_speedup")
            if getattr(request, name) is not None
        ]
        if given:
            raise GpuarenaError(
                f"{', '.join(given)}: only speed bounties have a problem, device kind and target; "
                f"a {request.category} bounty is verified by an organiser"
            )
    session.add(bounty)
    session.flush()
    session.add(
        BountyEvent(
            bounty_id=bounty.id,
            at=now,
            actor_id=who.user_id,
            action="created",
            from_state="",
            to_state="open",
            note=target_text(bounty),
        )
    )
    return bounty


# changing


def _claimer_only(session: Session, who: Caller, bounty: Bounty, what: str, staff_too: bool = False) -> None:
    if bounty.state not in HELD:
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}, not claimed: there is no claim to {what}")
    manages = who.role == "admin" or who.user_id == bounty.created_by
    if bounty.claimer_id != who.user_id and not (staff_too and manages):
        raise Forbidden(
            f"bounty {bounty.id} is claimed by {user_name(session, bounty.claimer_id)}: only they"
            + (" or the bounty's poster" if staff_too else "")
            + f" can {what} it"
        )


def claim(session: Session, who: Caller, bounty_id: int, now: dt.datetime | None = None) -> Bounty:
    """Take an open bounty: the caller becomes its one claimer for claim_days."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    if who.role == "runner":
        raise Forbidden(f"{who.name} is a runner account; a person claims bounties")
    if bounty.state in HELD:
        if bounty.claimer_id == who.user_id:
            raise GpuarenaError(
                f"bounty {bounty.id} is already yours until {when(bounty.claim_expires_at)}; renew the "
                f"claim instead (`gpuarena bounty renew {bounty.id}`)"
            )
        raise GpuarenaError(
            f"bounty {bounty.id} is already {bounty.state} by {user_name(session, bounty.claimer_id)} "
            f"(their claim runs until {when(bounty.claim_expires_at)}); "
            "only an open bounty can be claimed"
        )
    if bounty.state != "open":
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only an open bounty can be claimed")
    bounty.claimer_id = who.user_id
    bounty.claim_expires_at = now + dt.timedelta(days=bounty.claim_days)
    change(session, bounty, who.user_id, "claimed", "claimed", f"until {when(bounty.claim_expires_at)}", now)
    return bounty


def renew(session: Session, who: Caller, bounty_id: int, now: dt.datetime | None = None) -> Bounty:
    """The claimer keeps the claim another claim_days from now (before it lapses)."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    _claimer_only(session, who, bounty, "renew")
    bounty.claim_expires_at = now + dt.timedelta(days=bounty.claim_days)
    change(session, bounty, who.user_id, "renewed", bounty.state, f"until {when(bounty.claim_expires_at)}", now)
    return bounty


def release(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """Give a claim up (the claimer) or take it away (organisers): the bounty is open again."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    _claimer_only(session, who, bounty, "release", staff_too=True)
    note = note or f"{user_name(session, bounty.claimer_id)}'s claim released"
    let_go(bounty)
    change(session, bounty, who.user_id, "released", "open", note, now)
    return bounty


def submit_work(session: Session, who: Caller, bounty_id: int, note: str, now: dt.datetime | None = None) -> Bounty:
    """The claimer of a feature, bug or hardware bounty says the work is done and where it is;
    an organiser then verifies it. (A speed bounty is submitted by a ranked run instead.)"""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    if bounty.category == "speed":
        raise GpuarenaError(
            f"bounty {bounty.id} is a speed bounty: it is submitted by queueing a ranked run on "
            f"{bounty.problem_slug} with device kind {bounty.device_kind}"
        )
    _claimer_only(session, who, bounty, "submit")
    if bounty.state != "claimed":
        raise GpuarenaError(f"bounty {bounty.id} is already {bounty.state}")
    if not note.strip():
        raise GpuarenaError("note: say where the work is (a pull request, a commit, a report)")
    change(session, bounty, who.user_id, "submitted", "submitted", note.strip(), now)
    return bounty


def _poster(session: Session, who: Caller, bounty: Bounty, what: str) -> None:
    """Only the bounty's own poster (or an admin) manages it, and nobody their own claim: an
    organiser of anything could verify and pay any bounty, their own claim included."""
    if who.role != "admin" and who.user_id != bounty.created_by:
        raise Forbidden(
            f"only {user_name(session, bounty.created_by)}, who posted bounty {bounty.id}, or an admin can {what} it"
        )
    if bounty.claimer_id is not None and bounty.claimer_id == who.user_id:
        raise Forbidden(f"bounty {bounty.id} is your own claim: another admin or its poster must {what} it")


def verify(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser accepts the claimer's work on a feature, bug or hardware bounty."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    _poster(session, who, bounty, "verify")
    if bounty.category == "speed":
        raise GpuarenaError(
            f"bounty {bounty.id} is a speed bounty: only a ranked run of its claimer that reaches the "
            "target verifies it, never a person"
        )
    if bounty.state not in HELD:
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only a claimed or submitted bounty can be verified")
    bounty.claim_expires_at = None  # the claimer keeps it; the lock is done with
    change(
        session,
        bounty,
        who.user_id,
        "verified",
        "verified",
        note or f"{user_name(session, bounty.claimer_id)}'s work accepted",
        now,
    )
    return bounty


def pay(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser records that a verified bounty's reward was paid (the note: its reference)."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    _poster(session, who, bounty, "pay")
    if bounty.state != "verified":
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only a verified bounty can be paid")
    change(
        session,
        bounty,
        who.user_id,
        "paid",
        "paid",
        note or f"{bounty.reward_amount} {bounty.currency} to {user_name(session, bounty.claimer_id)}",
        now,
    )
    return bounty


def withdraw(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser takes a bounty off the board before it is verified."""
    now = now or utcnow()
    sweep(session, now)
    bounty = locked(session, bounty_id)
    _poster(session, who, bounty, "withdraw")
    if bounty.state not in LIVE:
        raise GpuarenaError(
            f"bounty {bounty.id} is {bounty.state}; only an open, claimed or submitted bounty can be withdrawn"
        )
    let_go(bounty)
    change(session, bounty, who.user_id, "withdrawn", "withdrawn", note, now)
    return bounty
