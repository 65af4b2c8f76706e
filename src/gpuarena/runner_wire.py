"""The runner protocol's message that carries formats: the job a runner claims, with its problem
and its solution. It sits above those formats (problems/, solutions/, the harness's records), so
not in contracts/ with the protocol's other messages (contracts/wire.py); the service's routes
and the runner's client both import it from here."""

from __future__ import annotations

from gpuarena.contracts.wire import Model
from gpuarena.harness.records import Mode
from gpuarena.problems.pack import PackedProblem
from gpuarena.solutions.model import Solution


class ClaimedJob(Model):
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
