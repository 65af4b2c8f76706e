"""`gpuarena check` of harvested candidates, kept apart from the harvest on a GPU: one candidate's
reference can trip a device-side assert (an index or offset redrawn out of what its kernel
accepts), and after that the process's CUDA context fails every later call. On a GPU the checks
run in a child process that is replaced after a CUDA error, so one bad candidate costs only its
own verdict; on the CPU they run here, as `gpuarena check` does."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from types import TracebackType

from gpuarena.harness.problem_check import CheckReport, check_problem

CUDA_ERROR_MARKS = ("CUDA error", "AcceleratorError", "device-side assert")
DIED = "the check's process died (a crash in the reference)"


class CandidateChecker:
    def __init__(self, device: str, isolate: bool | None = None) -> None:
        self.device = device
        self.isolate = device != "cpu" if isolate is None else isolate
        self.pool: ProcessPoolExecutor | None = None
        self.restarts = 0
        """Child processes replaced after a CUDA error (or a crash)."""

    def __call__(self, folder: Path) -> CheckReport:
        if not self.isolate:
            return check_problem(folder, device=self.device)
        if self.pool is None:
            self.pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
        try:
            report = self.pool.submit(check_problem, str(folder), self.device).result()
        except BrokenProcessPool:
            report = CheckReport(name=str(folder), errors=[DIED])
        if any(mark in error for error in report.errors for mark in (*CUDA_ERROR_MARKS, DIED)):
            self.close()
            self.restarts += 1
        return report

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.pool = None

    def __enter__(self) -> CandidateChecker:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
