"""What the JSON API accepts and returns (pydantic models double as the OpenAPI schema)."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import Field

from gpuarena.contracts.records import Evaluation, Mode
from gpuarena.contracts.wire import DeviceSlot, Model
from gpuarena.dataset.sample import SampleReport
from gpuarena.solutions.model import PackedSolution, Solution


class Health(Model):
    status: str
    version: str
    database: str
    queued: int
    running: int


class Me(Model):
    name: str
    role: str


class ProblemSummary(Model):
    id: str
    """The folder path, e.g. level1/softmax."""
    name: str
    level: int
    weight: float
    summary: str
    tags: list[str]
    version: int
    workloads: list[str]
    kind: Literal["kernel", "app"] = "kernel"
    """kernel: a reference to beat with a kernel; app: a migration target (a golden record a
    ported app is checked against, docs/migration.md)."""


class ProblemDetail(ProblemSummary):
    spec: dict[str, Any]
    readme: str
    reference: str
    solutions_public: bool


class DeviceKindInfo(Model):
    name: str
    runners_online: int
    queued: int


class SubmissionRequest(Model):
    problem: str
    """Problem id, e.g. level1/softmax."""
    device_kind: str
    """Which kind of device to run on, e.g. cpu or H100 (GET /api/device-kinds lists them)."""
    mode: Mode = "ranked"
    """test: correctness only; benchmark: and timing (public seed); ranked: secret seed, enters the
    leaderboard; profile: Nsight Compute on one workload (GPU device kinds), shown on the page."""
    solution: Solution | PackedSolution
    """The solution as `gpuarena pack` writes it, or {name, manifest, sources}."""
    contest: str | None = Field(default=None, min_length=1, max_length=64)
    """Enter the run into this contest (its slug): it must be a ranked run of one of the
    contest's problems on one of its device kinds, inside its window."""
    client_key: str | None = Field(default=None, min_length=1, max_length=64)
    """Optional idempotency key: sending the same key again (a retry after a lost answer)
    returns the submission it made instead of queueing another."""


class SubmissionOut(Model):
    id: int
    problem: str
    problem_version: int
    user: str
    device_kind: str
    mode: str
    status: str
    """QUEUED, RUNNING, a verdict (PASSED, WRONG_VALUES, ...), ERROR (the infrastructure gave up)
    or CANCELLED (by its author or an admin)."""
    reason: str
    score: float | None
    solution_hash: str
    created_at: dt.datetime
    finished_at: dt.datetime | None
    done: bool
    held_until: dt.datetime | None = None
    """A contest entry made during the contest's freeze: until then its result is shown to its
    author, the contest's organisers and admins only; to everyone else its status is HELD."""


class SubmissionDetail(SubmissionOut):
    evaluation: Evaluation | None = None
    queue_position: int | None = None
    """While queued: 1 for the next job its device kind's runners will take (fair order between users)."""
    runner: str | None = None
    """The runner holding or last holding its job."""
    runner_device: str | None = None
    """That runner's device slot, e.g. cuda:1."""
    attempts: int = 0
    """Claims of its job so far."""
    log_hidden: bool = False
    """The record's log (what the solution printed, tracebacks quoting its code) and the host's
    name are left out: only the author, organisers and admins see them, and everyone once the
    problem's solutions are public."""


class LeaderboardRow(Model):
    rank: int
    user: str
    score: float
    submission_id: int
    achieved_at: dt.datetime


class Leaderboard(Model):
    problem: str
    problem_version: int
    device_kind: str
    rows: list[LeaderboardRow]


class InviteRequest(Model):
    role: str = "participant"
    """participant, or organiser (admins only)."""
    uses: int = 1
    """How many people may sign up with it."""
    expires_in_days: float | None = 7.0
    note: str = ""


class InviteInfo(Model):
    id: int
    prefix: str
    role: str
    uses_left: int
    note: str
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None


class NewInvite(Model):
    code: str
    """Shown once: the link is /join/<code> on this server."""
    link: str
    info: InviteInfo


class WebhookRequest(Model):
    url: str


class WebhookInfo(Model):
    id: int
    url: str
    created_at: dt.datetime
    last_called_at: dt.datetime | None
    last_status: str


class NewWebhook(Model):
    secret: str
    """Shown once: check each call's X-Gpuarena-Signature (sha256=HMAC-SHA256 of the body) with it."""
    info: WebhookInfo


class JoinRequest(Model):
    code: str
    name: str


class TokenInfo(Model):
    id: int
    name: str
    prefix: str
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    last_used_at: dt.datetime | None
    device_kinds: list[str] | None

    @property
    def state(self) -> str:
        """active, expired or revoked (not part of the JSON: the dates say it)."""
        from gpuarena.service.tables import utcnow

        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= utcnow():
            return "expired"
        return "active"


class TokenRequest(Model):
    name: str = Field(default="", max_length=64)
    expires_in_days: float | None = Field(default=None, gt=0)


class NewToken(Model):
    token: str
    """Shown once: store it now."""
    info: TokenInfo


class NewUser(Model):
    name: str
    role: str = "participant"


class ResultPost(Model):
    lease_token: str
    evaluation: Evaluation
    sample: SampleReport | None = None
    """A sample's check: the report the evaluation sums up (dataset/sample_job.py)."""
    runner_id: int | None = None
    """The runner posting; when given it must be the runner holding the lease."""


class RunnerInfo(Model):
    id: int
    name: str
    account: str
    hostname: str
    """Shown to admins and to the runner's own account only (empty for others)."""
    version: str
    online: bool
    """Heard from within the last two minutes."""
    device_kinds: list[str]
    """Kinds of its healthy devices: what it may claim."""
    devices: list[DeviceSlot]
    """Every device slot, drained ones (healthy false, with the reason) included."""
    running: list[int]
    """Jobs it holds a lease on."""
    jobs_done: int
    last_seen_at: dt.datetime
