"""How a run ends early: a RunFailure carries the verdict (a Status) and its reason. Raised by
every floor of the harness and turned into the record by the supervisor. No pydantic here:
launch/ raises it before the worker started ahead has imported anything heavy."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpuarena.contracts.status import Status

if TYPE_CHECKING:
    from gpuarena.contracts.messages import Failure


class RunFailure(Exception):
    """Ends an evaluation with a verdict (TIMEOUT, RUNTIME_ERROR, ...)."""

    def __init__(self, status: Status | str, reason: str, detail: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.detail = Status(status), reason, detail


class MeasureAgain(RunFailure):
    """A failure that the same workload measured again need not meet: the device audit's samples
    lost to another process's CUDA context (device_audit.SamplesLost). measure.py measures the
    workload once more before it stands."""


WORKER_FAILURES = frozenset(
    {
        Status.COMPILE_ERROR,
        Status.RUNTIME_ERROR,
        Status.TIMEOUT,
        Status.WRONG_SHAPE,
        Status.WRONG_DTYPE,
        Status.REJECTED,
    }
)
"""The verdicts a worker may report about its own solution; any other status in a failure reply
(PASSED, or a word of its own) is a forged or broken reply."""


def worker_failure(reply: Failure) -> RunFailure:
    """A worker's failure reply as the run's verdict, checked: its status must be one a worker
    may give (its fields' types were checked by messages.read_reply); anything else is REJECTED."""
    if reply.status not in {s.value for s in WORKER_FAILURES}:
        return RunFailure(
            Status.REJECTED,
            f"the worker's failure reply was malformed (status {reply.status[:40]!r}, which a "
            "worker may not give): a forged reply",
        )
    return RunFailure(Status(reply.status), reply.reason[:4000], reply.traceback[:64000])
