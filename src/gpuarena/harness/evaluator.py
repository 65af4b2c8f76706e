"""Judging one solution after another in one long-lived process (the warm path, issue 18).

A `gpuarena run` pays its own start every time: Python, torch, the harness, a CUDA context
(2.5-3.4 s on an H100 outside the record), and its worker's start (1.2-2 s). An agent
searching over hundreds of candidates, or a script judging a folder of them, pays that once
here: the process stays, the device's peaks, the harness's CUPTI builds, the reference's ncu
figures and each solution's kept builds are reused (all keyed by content), and the next
run's worker is started before its job is asked for.

What is never kept: a worker serves one solution and is gone with it (supervisor.py), so
nothing of one solution is in the next one's process, and the next worker is started with
nothing of any problem or solution in it (started.py).
"""

from __future__ import annotations

from collections import deque

import torch

from gpuarena.contracts.records import Evaluation
from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.judge import Progress, RunOptions, evaluate
from gpuarena.harness.launch.started import StartedWorker
from gpuarena.harness.warm import Warm
from gpuarena.problems.loader import Problem
from gpuarena.solutions.model import Solution


class Evaluator:
    """Judges solutions one at a time on one device kind, workers always started ahead.

    `ahead` workers wait for jobs (default: 3 on a GPU, where a worker's start is its imports,
    then its CUDA context and timer under the GPU's lock, which it never takes while a job times
    (`prepare` alone is 1.3 s on an H200), against about 1.1 s a small job: with 2, a warm job's
    start-up still waited 0.17-0.24 s for its worker, 0.41 s in test mode (bench/warm_path.py);
    1 on the CPU). On a GPU, and for a job that times
    nothing (test mode), replacements start as a job starts (their imports use CPU cores while
    the job times the GPU, as a runner's next job process does); a job timed on the CPU has the
    cores to itself, and they start once it has ended."""

    def __init__(self, device: str, ahead: int | None = None):
        self.device = device
        self.gpu = backend_named(device).accelerator
        self.ahead = max(1, ahead if ahead is not None else (3 if self.gpu else 1))
        self._waiting: deque[StartedWorker] = deque()
        self.jobs = 0
        self.warm = Warm() if self.gpu else None
        """Kept between jobs: the PM sampler, the GPU's lock (harness/warm.py)."""
        self.prepare_on = _indexed(device) if self.gpu else None
        """The device waiting workers make their CUDA context on, as the run names it."""

    def judge(
        self, problem: Problem, solution: Solution, options: RunOptions, progress: Progress | None = None
    ) -> Evaluation:
        worker = self._take()
        alongside = self.gpu or options.mode == "test"
        if alongside:
            self._fill()
        try:
            return evaluate(problem, solution, options, progress, worker, self.warm)
        finally:
            self.jobs += 1
            if not alongside:
                self._fill()

    def close(self) -> None:
        """Stop the workers waiting for jobs."""
        while self._waiting:
            self._waiting.popleft().close()
        if self.warm is not None:
            self.warm.close()

    def __enter__(self) -> Evaluator:
        self._fill()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _take(self) -> StartedWorker | None:
        while self._waiting:
            waiting = self._waiting.popleft()
            if waiting.alive():
                return waiting
            waiting.close()
        return None  # the run starts its own, and says why if it cannot

    def _fill(self) -> None:
        while len(self._waiting) < self.ahead:
            try:
                self._waiting.append(
                    StartedWorker(
                        gpu=self.gpu,
                        prepare_on=self.prepare_on,
                        gpu_lock=self.warm.gpu if self.warm is not None else None,
                    )
                )
            except Exception:  # a run starts its own and reports why it could not
                return


def _indexed(device: str) -> str:
    """`cuda` as `cuda:N` (the current device), as the supervisor names the device it runs on."""
    parsed = torch.device(device)
    return str(backend_named(parsed.type).pin(parsed))
