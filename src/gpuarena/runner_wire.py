"""The runner protocol's message that carries formats: the job a runner claims, with its problem
and its solution. It sits above those formats (problems/, solutions/, the harness's records), so
not in contracts/ with the protocol's other messages (contracts/wire.py); the service's routes
and the runner's client both import it from here.

Like CMS's serializable jobs, each kind of job is a class of its own that names its type on the
wire (`kind`), and a reader gets back the class the writer sent (TYPED_JOB, a discriminated
union): runners of protocol 1 and up read a KernelJob, an AppJob or a SampleJob and run it by
its kind; runners of the legacy protocol read ClaimedJob, the same fields without the kind."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from gpuarena.contracts.packed import PackedProblem
from gpuarena.contracts.records import Mode
from gpuarena.contracts.wire import LEGACY_PROTOCOL, JobKind, Model
from gpuarena.solutions.model import Solution


class ClaimedJob(Model):
    """What every claimed job carries; as it is, the claim of a legacy runner (protocol 0),
    whose model it is: never add a field here (a legacy runner would refuse the claim)."""

    job_id: int
    lease_token: str
    lease_s: float
    submission_id: int
    device_kind: str
    mode: Mode
    seed: int | None
    """Ranked jobs: the job's own secret seed (drawn when it was queued), for the supervisor only."""
    problem: PackedProblem
    solution: Solution


class KernelJob(ClaimedJob):
    """A kernel judged on a problem by the harness."""

    kind: Literal["kernel"] = "kernel"


class AppJob(ClaimedJob):
    """A port of a whole application held to its golden run: `problem` is the golden folder
    (a migration target), `solution` the port."""

    kind: Literal["app"] = "app"


class SampleJob(ClaimedJob):
    """A community sample checked against the dataset: `problem` is the packed dataset (what the
    sample must not repeat), `solution` the sample."""

    kind: Literal["sample"] = "sample"


TypedJob = Annotated[KernelJob | AppJob | SampleJob, Field(discriminator="kind")]
"""The claim of a runner of protocol 1 and up: the job as the class of its kind."""
TYPED_JOB: TypeAdapter[TypedJob] = TypeAdapter(TypedJob)
JOBS: dict[JobKind, type[TypedJob]] = {"kernel": KernelJob, "app": AppJob, "sample": SampleJob}
"""Each kind's class (the test checks that every JobKind has one)."""


def claim_json(job: TypedJob, protocol: int) -> str:
    """The claimed job as a runner of `protocol` reads it: a legacy runner gets today's
    ClaimedJob (no kind), a newer one the typed job."""
    return job.model_dump_json(exclude={"kind"} if protocol == LEGACY_PROTOCOL else None)
