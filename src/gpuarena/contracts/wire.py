"""The runner protocol's messages, as both sides see them: the service's routes
(service/runner_routes.py) and the runner's client (client.py, runner/). Only those that carry
no format: the claimed job, which carries a problem and a solution, is in gpuarena/runner_wire.py."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

JobKind = Literal["kernel", "app", "sample"]
"""What a claimed job runs: a kernel judged on a problem by the harness, a port of a whole
application held to its golden run (a migration check), or a community sample checked against
the dataset. The service tells it once, from the problem it claims a job of
(service/runner_routes.py, `job_kind`); the claim carries it to runners of protocol 1 and up
as a typed job (runner_wire.py: KernelJob, AppJob, SampleJob), and the runner's job process runs
each kind by its own entry (runner/execute.py, `RUNS`)."""

LEGACY_PROTOCOL = 0
"""The runner protocol of runners that send no version (before issue 50): their claimed job
is runner_wire.ClaimedJob exactly, with no kind (their models forbid fields they do not know)."""
PROTOCOL_VERSION = 1
"""The newest runner protocol this package speaks. A runner sends its own in its hello and its
claims; the service answers each claim in the shape of the claim's version, and refuses a
version newer than its own (servers are upgraded before runners, docs/deploy.md).
0: no kind on the claim; 1: the claim is a typed job, told apart by its `kind`."""


class Model(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class DeviceSlot(Model):
    device: str
    """cpu, or cuda:N as the runner host numbers its GPUs."""
    kind: str
    """What jobs are routed by: the device model ("H100", "cpu"), then "@STACK" where the runner
    names the software stack it offers ("cpu@numpy-port", "MXC500@maca"): a job for a kind runs
    only on a slot of exactly that kind, so a migration check runs on the stack it asked for."""
    name: str = ""
    healthy: bool = True
    reason: str = ""
    vendor: str = ""
    """NVIDIA for a GPU nvidia-smi lists; for the CPU, its vendor (GenuineIntel, AuthenticAMD...)."""
    stack: str = ""
    """The software stack the runner names (--stack), "" for the default one."""
    software: dict[str, str] = Field(default_factory=dict)
    """What the stack holds: python, torch, numpy and the other frameworks installed, with versions."""


class RunnerHello(Model):
    name: str = Field(min_length=1, max_length=128)
    hostname: str = ""
    version: str = ""
    devices: list[DeviceSlot]
    protocol: int = Field(default=LEGACY_PROTOCOL, ge=0)
    """The runner's protocol version (PROTOCOL_VERSION); left out by runners that have none."""


class RunnerId(Model):
    runner_id: int


class ClaimRequest(Model):
    runner_id: int
    device_kinds: list[str]
    wait_s: float = Field(default=0.0, ge=0, le=30)
    """Wait up to this long for a job (long polling)."""
    device: str = Field(default="", max_length=64)
    """The runner's device slot that will run the job (cuda:1); must be one of its healthy devices."""
    protocol: int = Field(default=LEGACY_PROTOCOL, ge=0)
    """The runner's protocol version: the claimed job comes in its shape (LEGACY_PROTOCOL: no kind)."""


class HeartbeatRequest(Model):
    runner_id: int
    leases: dict[int, str] = Field(default_factory=dict)
    """job id -> lease token, for every job the runner is working on."""
    devices: list[DeviceSlot] | None = None


class HeartbeatReply(Model):
    lost: list[int]
    """Jobs whose lease is gone: stop working on them."""
    preempted: list[int] = []
    """Those of `lost` that were pre-empted: queued again for later, behind other users' jobs."""


class ResultReply(Model):
    accepted: bool
    duplicate: bool


class Release(Model):
    lease_token: str
    error: str = ""
    harness_failed: bool = False
    """The job's harness died without a record while its device stayed healthy: the solution
    may be what broke it, so the job is not run again blindly (the submission ends as ERROR)."""
