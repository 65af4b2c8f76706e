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
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation

from sqlalchemy import ColumnElement, Select, String, and_, cast, exists, literal, or_, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from gpuarena.contracts.device import device_type
from gpuarena.errors import GpuarenaError
from gpuarena.service import holdback
from gpuarena.service.bounty_schemas import BountyRequest
from gpuarena.service.db import Database
from gpuarena.service.deps import Caller
from gpuarena.service.errors import Forbidden, NotFound
from gpuarena.service.leaderboard import RANKED_MODE, counts, read_rows
from gpuarena.service.tables import Bounty, BountyEvent, Problem, Submission, User, utcnow

CATEGORIES = ("speed", "feature", "bug", "hardware")
STATES = ("open", "claimed", "submitted", "verified", "paid", "expired", "withdrawn")
TARGETS = ("reference", "leaderboard")
LIVE = ("open", "claimed", "submitted")
"""States a deadline can still expire and an organiser can withdraw from."""
HELD = ("claimed", "submitted")
"""States with a claimer."""
IN_FLIGHT = ("QUEUED", "RUNNING")
MAX_CLAIM_DAYS = 365
MAX_SPEEDUP = 1e6
_CURRENCY = re.compile(r"^[A-Z][A-Z0-9]{1,15}$")


def when(value: dt.datetime | None) -> str:
    return f"{value:%Y-%m-%d %H:%M} UTC" if value else "-"


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


def _change(
    session: Session, bounty: Bounty, actor_id: int | None, action: str, to_state: str, note: str, now: dt.datetime
) -> None:
    """Move bounty to to_state (or leave it, for a note such as a run's attempt) and keep the event."""
    session.add(
        BountyEvent(
            bounty_id=bounty.id,
            at=now,
            actor_id=actor_id,
            action=action,
            from_state=bounty.state,
            to_state=to_state,
            note=note,
        )
    )
    bounty.state = to_state


def _let_go(bounty: Bounty) -> None:
    bounty.claimer_id, bounty.claim_expires_at = None, None


def _held(session: Session, bounty_id: int) -> Bounty:
    """The bounty, row-locked for this transaction (PostgreSQL; SQLite has one writer anyway)."""
    bounty = session.scalar(select(Bounty).where(Bounty.id == bounty_id).with_for_update())
    if bounty is None:
        raise NotFound(f"no bounty {bounty_id} (GET /api/bounties lists them)")
    return bounty


def _name(session: Session, user_id: int | None) -> str:
    return (session.scalar(select(User.name).where(User.id == user_id)) or "?") if user_id is not None else "nobody"


def _claimer_only(session: Session, who: Caller, bounty: Bounty, what: str, staff_too: bool = False) -> None:
    if bounty.state not in HELD:
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}, not claimed: there is no claim to {what}")
    manages = who.role == "admin" or who.user_id == bounty.created_by
    if bounty.claimer_id != who.user_id and not (staff_too and manages):
        raise Forbidden(
            f"bounty {bounty.id} is claimed by {_name(session, bounty.claimer_id)}: only they"
            + (" or the bounty's poster" if staff_too else "")
            + f" can {what} it"
        )


def claim(session: Session, who: Caller, bounty_id: int, now: dt.datetime | None = None) -> Bounty:
    """Take an open bounty: the caller becomes its one claimer for claim_days."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    if who.role == "runner":
        raise Forbidden(f"{who.name} is a runner account; a person claims bounties")
    if bounty.state in HELD:
        if bounty.claimer_id == who.user_id:
            raise GpuarenaError(
                f"bounty {bounty.id} is already yours until {when(bounty.claim_expires_at)}; renew the "
                f"claim instead (`gpuarena bounty renew {bounty.id}`)"
            )
        raise GpuarenaError(
            f"bounty {bounty.id} is already {bounty.state} by {_name(session, bounty.claimer_id)} "
            f"(their claim runs until {when(bounty.claim_expires_at)}); "
            "only an open bounty can be claimed"
        )
    if bounty.state != "open":
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only an open bounty can be claimed")
    bounty.claimer_id = who.user_id
    bounty.claim_expires_at = now + dt.timedelta(days=bounty.claim_days)
    _change(session, bounty, who.user_id, "claimed", "claimed", f"until {when(bounty.claim_expires_at)}", now)
    return bounty


def renew(session: Session, who: Caller, bounty_id: int, now: dt.datetime | None = None) -> Bounty:
    """The claimer keeps the claim another claim_days from now (before it lapses)."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    _claimer_only(session, who, bounty, "renew")
    bounty.claim_expires_at = now + dt.timedelta(days=bounty.claim_days)
    _change(session, bounty, who.user_id, "renewed", bounty.state, f"until {when(bounty.claim_expires_at)}", now)
    return bounty


def release(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """Give a claim up (the claimer) or take it away (organisers): the bounty is open again."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    _claimer_only(session, who, bounty, "release", staff_too=True)
    note = note or f"{_name(session, bounty.claimer_id)}'s claim released"
    _let_go(bounty)
    _change(session, bounty, who.user_id, "released", "open", note, now)
    return bounty


def submit_work(session: Session, who: Caller, bounty_id: int, note: str, now: dt.datetime | None = None) -> Bounty:
    """The claimer of a feature, bug or hardware bounty says the work is done and where it is;
    an organiser then verifies it. (A speed bounty is submitted by a ranked run instead.)"""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
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
    _change(session, bounty, who.user_id, "submitted", "submitted", note.strip(), now)
    return bounty


def _poster(session: Session, who: Caller, bounty: Bounty, what: str) -> None:
    """Only the bounty's own poster (or an admin) manages it, and nobody their own claim: an
    organiser of anything could verify and pay any bounty, their own claim included."""
    if who.role != "admin" and who.user_id != bounty.created_by:
        raise Forbidden(
            f"only {_name(session, bounty.created_by)}, who posted bounty {bounty.id}, or an admin can {what} it"
        )
    if bounty.claimer_id is not None and bounty.claimer_id == who.user_id:
        raise Forbidden(f"bounty {bounty.id} is your own claim: another admin or its poster must {what} it")


def verify(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser accepts the claimer's work on a feature, bug or hardware bounty."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    _poster(session, who, bounty, "verify")
    if bounty.category == "speed":
        raise GpuarenaError(
            f"bounty {bounty.id} is a speed bounty: only a ranked run of its claimer that reaches the "
            "target verifies it, never a person"
        )
    if bounty.state not in HELD:
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only a claimed or submitted bounty can be verified")
    bounty.claim_expires_at = None  # the claimer keeps it; the lock is done with
    _change(
        session,
        bounty,
        who.user_id,
        "verified",
        "verified",
        note or f"{_name(session, bounty.claimer_id)}'s work accepted",
        now,
    )
    return bounty


def pay(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser records that a verified bounty's reward was paid (the note: its reference)."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    _poster(session, who, bounty, "pay")
    if bounty.state != "verified":
        raise GpuarenaError(f"bounty {bounty.id} is {bounty.state}; only a verified bounty can be paid")
    _change(
        session,
        bounty,
        who.user_id,
        "paid",
        "paid",
        note or f"{bounty.reward_amount} {bounty.currency} to {_name(session, bounty.claimer_id)}",
        now,
    )
    return bounty


def withdraw(session: Session, who: Caller, bounty_id: int, note: str = "", now: dt.datetime | None = None) -> Bounty:
    """An organiser takes a bounty off the board before it is verified."""
    now = now or utcnow()
    sweep(session, now)
    bounty = _held(session, bounty_id)
    _poster(session, who, bounty, "withdraw")
    if bounty.state not in LIVE:
        raise GpuarenaError(
            f"bounty {bounty.id} is {bounty.state}; only an open, claimed or submitted bounty can be withdrawn"
        )
    _let_go(bounty)
    _change(session, bounty, who.user_id, "withdrawn", "withdrawn", note, now)
    return bounty


# the harness's side: ranked runs submit and verify speed bounties


def _claimed_for(submission: Submission, states: Iterable[str]) -> Select[Bounty]:
    """The speed bounties in `states` that the submission's author holds on its problem and device kind."""
    return (
        select(Bounty)
        .join(Problem, Problem.slug == Bounty.problem_slug)
        .where(
            Problem.id == submission.problem_id,
            Bounty.category == "speed",
            Bounty.state.in_(tuple(states)),
            Bounty.claimer_id == submission.user_id,
            Bounty.device_kind == submission.device_kind,
        )
        .with_for_update(of=Bounty)
    )


def on_submission(session: Session, submission: Submission, now: dt.datetime | None = None) -> list[int]:
    """A ranked run queued by a live claimer of speed bounties on its problem and device kind
    moves them claimed -> submitted. Called in the transaction that accepts the submission;
    returns the bounties moved."""
    if submission.mode != RANKED_MODE:
        return []
    now = now or submission.created_at or utcnow()
    moved = []
    for bounty in session.scalars(_claimed_for(submission, ("claimed",))):
        if bounty.claim_expires_at is not None and bounty.claim_expires_at <= now:
            continue  # lapsed (not yet swept): the run came too late
        _change(
            session,
            bounty,
            submission.user_id,
            "submitted",
            "submitted",
            f"{_run(submission.id)} on {submission.device_kind}",
            now,
        )
        moved.append(bounty.id)
    return moved


def on_result(session: Session, submission: Submission) -> list[int]:
    """A finished ranked run of a claimer: verifies each of their speed bounties on its problem
    and device kind whose required score it reaches (the service is the actor); a run that falls
    short is noted in the history. Only runs queued after the bounty was posted, while the claim
    (and the deadline) held, count: a run queued before the bounty existed was not made for it.
    A run whose result a contest's freeze holds is only noted as held: `sweep` judges it when
    the hold ends (the history is public). Called in the transaction that accepts the result;
    returns the bounties verified."""
    if submission.mode != RANKED_MODE:
        return []
    now = submission.finished_at or utcnow()
    held = holdback.is_held(submission.held_until, utcnow())
    verified = []
    for bounty in session.scalars(_claimed_for(submission, HELD)):
        made = submission.created_at
        if made < bounty.created_at:
            continue  # queued before the bounty was posted
        if (bounty.claim_expires_at is not None and made > bounty.claim_expires_at) or (
            bounty.deadline is not None and made > bounty.deadline
        ):
            continue
        if held:
            assert submission.held_until is not None
            _change(
                session,
                bounty,
                None,
                HELD_RUN,
                bounty.state,
                f"{_run(submission.id)} on {submission.device_kind} is a contest entry made during the "
                f"contest's freeze: its result is held until {when(submission.held_until)}, when it is "
                "judged for this bounty",
                now,
            )
        elif _judge(session, bounty, submission, now):
            verified.append(bounty.id)
    return verified


HELD_RUN = "held"
"""The history's action for a run whose result a contest's freeze holds (judged at its end)."""
JUDGED = ("verified", "attempt")
"""The actions of a run's verdict on a speed bounty."""


def _run(submission_id: int) -> str:
    """How the history names a ranked run: every note about a run starts with it (then a space),
    so the run's events are found again by it (`_about`)."""
    return f"ranked run #{submission_id}"


def _about(submission_id: InstrumentedAttribute[int]) -> ColumnElement[bool]:
    """SQL: the event's note is about this run."""
    return BountyEvent.note.like(literal("ranked run #") + cast(submission_id, String) + literal(" %"))


def _judge(session: Session, bounty: Bounty, submission: Submission, now: dt.datetime) -> bool:
    """The run's verdict on the bounty: verified when it reaches the target, else an attempt."""
    assert bounty.required_score is not None
    if counts(submission) and submission.score is not None and submission.score >= bounty.required_score:
        bounty.submission_id, bounty.claim_expires_at = submission.id, None  # the lock is done with
        _change(
            session,
            bounty,
            None,
            "verified",
            "verified",
            f"{_run(submission.id)} on {submission.device_kind} scored {submission.score:.4g}; "
            f"the target was {bounty.required_score:.4g}",
            now,
        )
        return True
    passed = submission.status == "PASSED" and submission.score is not None
    outcome = (
        f"scored {submission.score:.4g}, short of {bounty.required_score:.4g}"
        if passed
        else f"ended {submission.status}"
    )
    _change(session, bounty, None, "attempt", bounty.state, f"{_run(submission.id)} {outcome}", now)
    return False


def _released(now: dt.datetime) -> Select[Bounty, Submission]:
    """Held runs whose hold is over and that no verdict has judged yet, with the bounty (still
    claimed or submitted by the run's author) that noted them as held."""
    noted = select(BountyEvent.id).where(
        BountyEvent.bounty_id == Bounty.id, BountyEvent.action == HELD_RUN, _about(Submission.id)
    )
    judged = select(BountyEvent.id).where(
        BountyEvent.bounty_id == Bounty.id, BountyEvent.action.in_(JUDGED), _about(Submission.id)
    )
    return (
        select(Bounty, Submission)
        .join(Problem, Problem.slug == Bounty.problem_slug)
        .join(
            Submission,
            and_(
                Submission.user_id == Bounty.claimer_id,
                Submission.problem_id == Problem.id,
                Submission.device_kind == Bounty.device_kind,
            ),
        )
        .where(
            Bounty.category == "speed",
            Bounty.state.in_(HELD),
            Submission.mode == RANKED_MODE,
            Submission.held_until <= now,
            exists(noted),
            ~exists(judged),
        )
        .order_by(Submission.id)
    )


# time: lapsed claims and passed deadlines


def _run_in_flight(session: Session, bounty: Bounty, queued_by: dt.datetime, now: dt.datetime) -> bool:
    """Whether the claimer has a ranked run for this speed bounty queued by `queued_by` that
    has not finished, or whose result a contest's freeze still holds: the claim (or deadline)
    waits for its verdict instead of lapsing under it."""
    if bounty.category != "speed" or bounty.claimer_id is None:
        return False
    return (
        session.scalar(
            select(Submission.id)
            .join(Problem, Problem.id == Submission.problem_id)
            .where(
                Submission.user_id == bounty.claimer_id,
                Problem.slug == bounty.problem_slug,
                Submission.device_kind == bounty.device_kind,
                Submission.mode == RANKED_MODE,
                or_(Submission.status.in_(IN_FLIGHT), Submission.held_until > now),
                Submission.created_at <= queued_by,
                Submission.created_at >= bounty.created_at,  # runs from before the bounty do not count
            )
            .limit(1)
        )
        is not None
    )


def _expiring(now: dt.datetime) -> ColumnElement[bool]:
    """Bounties whose deadline passed; work submitted to an organiser in time waits for them."""
    return and_(
        Bounty.state.in_(LIVE), Bounty.deadline <= now, ~and_(Bounty.state == "submitted", Bounty.category != "speed")
    )


def _lapsing(now: dt.datetime) -> ColumnElement[bool]:
    """Claims whose lock ran out: any claimed bounty, and a submitted speed bounty (its run fell
    short; a feature submitted to an organiser keeps its claim while they look at it)."""
    return and_(
        Bounty.claim_expires_at <= now,
        or_(Bounty.state == "claimed", and_(Bounty.state == "submitted", Bounty.category == "speed")),
    )


def due(session: Session, now: dt.datetime | None = None) -> bool:
    """Whether `sweep` has anything to do (a cheap read, so reads sweep only when needed)."""
    now = now or utcnow()
    if session.scalar(select(Bounty.id).where(or_(_expiring(now), _lapsing(now))).limit(1)) is not None:
        return True
    return session.execute(_released(now).limit(1)).first() is not None


def sweep(session: Session, now: dt.datetime | None = None) -> list[int]:
    """Judge the held runs whose hold is over (before anything lapses: the claim waited for
    them), then expire bounties past their deadline and put lapsed claims back to open (the
    service is the actor), except while a ranked run the claimer queued in time is still
    running or held."""
    now = now or utcnow()
    changed = []
    for bounty, submission in session.execute(_released(now).with_for_update(of=Bounty, skip_locked=True)).all():
        if bounty.state in HELD and bounty.claimer_id == submission.user_id:  # an earlier run may have verified it
            _judge(session, bounty, submission, now)
            changed.append(bounty.id)
    for bounty in session.scalars(select(Bounty).where(_expiring(now)).with_for_update(skip_locked=True)):
        assert bounty.deadline is not None
        if _run_in_flight(session, bounty, bounty.deadline, now):
            continue
        _let_go(bounty)
        _change(session, bounty, None, "expired", "expired", f"the deadline {when(bounty.deadline)} passed", now)
        changed.append(bounty.id)
    for bounty in session.scalars(select(Bounty).where(_lapsing(now)).with_for_update(skip_locked=True)):
        assert bounty.claim_expires_at is not None
        if _run_in_flight(session, bounty, bounty.claim_expires_at, now):
            continue
        note = f"{_name(session, bounty.claimer_id)}'s claim ran out at {when(bounty.claim_expires_at)}"
        _let_go(bounty)
        _change(session, bounty, None, "claim lapsed", "open", note, now)
        changed.append(bounty.id)
    return changed


def refresh(db: Database, now: dt.datetime | None = None) -> None:
    """Sweep before a read, in a write transaction of its own, only when something is due."""
    with db.read() as session:
        if not due(session, now):
            return
    with db.write() as session:
        sweep(session, now)


# reading


def target_text(bounty: Bounty) -> str:
    """A speed bounty's target in words; "" for the others."""
    if bounty.category != "speed" or bounty.required_score is None:
        return ""
    over = (
        "the reference"
        if bounty.target_over == "reference"
        else f"the leaderboard's best ({bounty.baseline_score:.4g} when posted)"
    )
    return (
        f"speed-up of at least {bounty.target_speedup:g}x over {over} on {bounty.problem_slug}, device kind "
        f"{bounty.device_kind}: a ranked score of {bounty.required_score:.4g} or more"
    )
