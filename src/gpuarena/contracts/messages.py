"""What supervisor and worker say to each other: one typed message per worker operation, and one
reply for each (protocol.py moves them over the socket).

Requests go supervisor -> worker, pickled (the worker trusts the supervisor). Replies come back
as JSON from a process the solution shares, so each is validated against its model before the
supervisor reads a field of it (`read_reply`): a missing field, a value of the wrong type, a
reply of another operation's shape is not a harness message, and the run is REJECTED; fields the
model does not define are dropped unread. The worker serves each request type with one handler (inside/worker.py's `HANDLERS`,
checked by tests/test_messages.py to cover every request here).
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- replies: worker -> supervisor, validated --------------------------------------------------
class Reply(Message):
    """A worker's reply. Fields it does not define are dropped unread (a solution that adds a
    `method` to its build reply changes nothing: the supervisor decides the method); those it
    defines must have their types."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    op: str
    nonce: str = ""
    """The request's nonce, echoed (process.py): a frame written by the solution cannot know it."""


class Done(Reply):
    """An operation that has nothing to say but that it is done."""

    op: Literal["ready", "setup", "select", "kernel_close", "release", "call", "exit"]


class Prepared(Reply):
    op: Literal["prepare"] = "prepare"
    method: str | None = None
    """What this worker's timer times with, said before any solution code runs."""
    icache_sweep: bool = False
    timer_records: str | None = None
    """Where this worker's timer reads its device records from (the NVIDIA backend's collector)."""
    steps: dict[str, float] = Field(default_factory=dict)
    """Seconds per step of the preparation (bench/research/warm_breakdown.py)."""


class RuntimeStarted(Reply):
    op: Literal["runtime"] = "runtime"
    runtime: str | None = None


class Built(Reply):
    op: Literal["build"] = "build"
    network: str = "unknown"
    rights: str = "unknown"
    runtime: str | None = None


class Timed(Reply):
    """A block's raw samples, per call; the supervisor checks their count and sizes (measure.py)."""

    op: Literal["time", "calibrate"] = "time"
    device_ns: list[StrictInt] | None = None
    e2e_ns: list[StrictInt] | None = None
    method: str = ""
    kernel_error: str | None = None
    """The kernel profiler failed (the harness's, not the solution's fault): no figure, no verdict."""


class Failure(Reply):
    """The solution failed the request; the status is checked against what a worker may report
    (failure.worker_failure)."""

    op: Literal["failure"] = "failure"
    status: str
    reason: str = ""
    traceback: str = ""


R = TypeVar("R", bound=Reply)


# -- requests: supervisor -> worker ------------------------------------------------------------
class Request(Message, Generic[R]):
    op: ClassVar[str]
    reply: ClassVar[type[Reply]]
    """The reply this request expects (or a Failure)."""
    nonce: str = ""


class RunSetup(Message):
    """What the worker needs of the run before the solution: the device, the problem's calling
    convention and names, the timing method the supervisor chose, a backend's compiled extras."""

    device: str = "cpu"
    convention: str = "return"
    input_names: list[str] = Field(default_factory=list)
    output_names: list[str] = Field(default_factory=list)
    method: str | None = None
    float_outputs_converted: bool = False
    """A floating output of another floating dtype than the reference's is converted into its
    destination, not WRONG_DTYPE: the problem keeps a peer's check that compares values whatever
    the dtype (GPU MODE's verbose_allclose; ProblemSpec.tolerance_as_stated)."""
    icache_image: str | None = None
    """The instruction-cache sweep compiled once by the supervisor (device/nvidia.py's worker_setup)."""
    timer_image: str | None = None
    """The timing library built once by the supervisor, base64 (the NVIDIA backend's CUPTI
    collector, device/activity_timer.py), loaded by the worker from memory."""


class Ready(Request[Done]):
    """Answered once the worker's imports are done (a worker started ahead)."""

    op = "ready"
    reply = Done


class Prepare(Request[Prepared]):
    """The harness's own set-up, before any solution code: the device, its context, the timer."""

    op = "prepare"
    reply = Prepared
    setup: RunSetup


class StartRuntime(Request[RuntimeStarted]):
    """The solution's language runtime brought up as harness work (solutions/runtimes.py)."""

    op = "runtime"
    reply = RuntimeStarted
    language: str
    setup: RunSetup


class Build(Request[Built]):
    op = "build"
    reply = Built
    solution: dict[str, Any]
    setup: RunSetup


class Share(Request[Done]):
    """A workload's shared buffers (transport.py handles; CUDA ones' descriptors follow the
    request, SCM_RIGHTS)."""

    op = "setup"
    reply = Done
    workload: str
    sets: list[dict[str, Any]]
    dests: list[list[Any]]


class Select(Request[Done]):
    """Back to a workload shared earlier (the kernel-duration phase, after all of them)."""

    op = "select"
    reply = Done
    workload: str


class CloseKernelProfiler(Request[Done]):
    op = "kernel_close"
    reply = Done


class Release(Request[Done]):
    """Give back what the worker merely caches (a workload did not fit: held_memory.py)."""

    op = "release"
    reply = Done


class Call(Request[Done]):
    """One call on set `index`, its outputs copied to the set's destinations."""

    op = "call"
    reply = Done
    index: int
    seed: int | None = None
    """What torch's generators are seeded with before the call (ProblemSpec.seeded_calls)."""


class Time(Request[Timed]):
    """Warm-up calls, then a timed block of n calls over the sets in turn."""

    op = "time"
    reply = Timed
    n: int
    warmup: int = 0
    evict: bool = True
    seeds: list[int] = []
    """Per set, what torch's generators are seeded with before each call on it (ProblemSpec.
    seeded_calls): drawn afresh with the set's inputs every round, so no draw can be kept from one
    round for the next; empty, nothing is seeded."""
    kernel_library: str | None = None
    """The kernel-duration phase: the range profiler's library, held until CloseKernelProfiler."""


class Calibrate(Request[Timed]):
    """A `time` block of a solve() that does nothing, before any solution code (calibration.py)."""

    op = "calibrate"
    reply = Timed
    n: int
    setup: RunSetup


class Exit(Request[Done]):
    op = "exit"
    reply = Done


REQUESTS: tuple[type[Request[Any]], ...] = (
    Ready,
    Prepare,
    StartRuntime,
    Build,
    Share,
    Select,
    CloseKernelProfiler,
    Release,
    Call,
    Time,
    Calibrate,
    Exit,
)


class NotAReply(ValueError):
    """A frame that is not the reply the request asked for."""


def read_reply(raw: dict[str, Any], request: Request[R]) -> R | Failure:
    """The worker's JSON reply as the request's reply model, or its Failure; NotAReply when it
    is neither (another operation's reply, a field missing or of the wrong type)."""
    op = raw.get("op")
    model: type[Reply] = Failure if op == "failure" else request.reply
    if op != "failure" and op != request.op:
        raise NotAReply(f"a {str(op)[:40]!r} reply to a {request.op!r} request")
    try:
        return model.model_validate(raw)  # type: ignore[return-value]  # request.reply is R
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))[:80]
        raise NotAReply(
            f"{exc.error_count()} field(s) wrong, first {where or 'the reply'}: {first['msg'][:120]}"
        ) from None
