"""The worker's own `time` code run in the supervisor, on trusted code (the reference, or no
solution at all): what the twin (twin.py) and the calibration (calibration.py) measure the
harness's share with."""

from __future__ import annotations

import os
import threading
from typing import Any

import torch

from gpuarena.harness.inside.worker import CallFailure, Worker
from gpuarena.harness.proctree import children_of_thread


class TrustedWorker(Worker):
    """The worker's `time` code, in the supervisor. Its process checks look at this thread alone:
    a supervisor's process may hold many threads (a runner's, a server's, a test suite's) that a
    worker never has, and enumerating them, and reading each one's children, is harness cost the
    worker never pays. With 60 idle threads beside it the twin's share was 199 µs a call against
    75, and a timer forged to report 2-3 µs a call PASSED (monkeypatch_timers, in CI)."""

    @staticmethod
    def _threads() -> set[threading.Thread]:
        return {t for t in (threading.current_thread(),) if t.is_alive()}

    def _left_running(self, threads_before: set[threading.Thread], children_before: set[int] | None) -> None:
        self._threads() - threads_before  # a worker's checks, at a worker's cost; the reference is trusted
        if children_before is not None:
            children_of_thread(os.getpid(), threading.get_native_id())

    def _outputs(self, k: int, result: Any) -> list[torch.Tensor]:
        try:  # the same checks, for the same cost; a reference may return a view of an input
            return super()._outputs(k, result)
        except CallFailure:
            return list(result) if isinstance(result, (tuple, list)) else [result]
