"""Run one job in a process of its own: the job (with a ranked run's secret seed) arrives on
stdin, the Evaluation is written to the file the job names. A crash here never takes the
runner down, and the runner can stop a job by killing this process group. The harness (and
torch) is imported and the worker started before the job is read, so a runner can start this
process ahead of its next job and hand it the job when one comes.

    python -m gpuarena.runner.execute < job.json
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuarena.dataset.sample_pack import SAMPLE_LANGUAGE
from gpuarena.harness.records import Mode
from gpuarena.problems.pack import PackedProblem
from gpuarena.solutions.model import Solution


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: PackedProblem
    solution: Solution
    device: str
    """The harness device inside this process: cpu, or cuda (the runner pins the GPU with CUDA_VISIBLE_DEVICES)."""
    mode: Mode
    seed: int | None = None
    timeout_s: float = 600.0
    budget_s: float = 2.0
    cache: str
    """Where problem folders are rebuilt."""
    out: str
    """Where the Evaluation is written (a file the runner owns); a sample's check writes its
    SampleReport beside it, as SAMPLE_REPORT."""


SAMPLE_REPORT = "sample.json"


def _die_with_the_runner() -> None:
    """Get SIGTERM when the runner that started this process dies (Linux), and exit now if it
    already has: a job left running after its runner was killed would hold the device while
    the restarted runner starts the next job on it (and its result could never be posted)."""
    import ctypes
    import os

    runner = os.environ.get("GPUARENA_RUNNER_PID")
    if not runner or not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != int(runner):
        sys.exit(143)


def main() -> int:
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.harness.launch.started import StartedWorker
    from gpuarena.problems.pack import unpack_problem

    # the runner stops a job with SIGTERM: unwind, so the supervisor stops its worker
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    _die_with_the_runner()
    # the worker starts (its guards, its interpreter, torch) while the job is still on its way
    worker = StartedWorker(gpu=os.environ.get("GPUARENA_JOB_DEVICE", "cuda") != "cpu")
    request = ExecuteRequest.model_validate_json(sys.stdin.buffer.read())
    out = Path(request.out)
    if is_app_target(request.problem):
        worker.close()  # a port runs as its own sandboxed processes, not in a kernel worker
        from gpuarena.apps.job import evaluate_app

        _write(
            out,
            evaluate_app(
                request.problem,
                request.solution,
                request.device,
                request.mode,
                Path(request.cache),
                timeout_s=request.timeout_s,
            ),
        )
        return 0
    if request.solution.manifest.language == SAMPLE_LANGUAGE:
        worker.close()  # the check starts the harness's workers for the sample's kernels itself
        from gpuarena.dataset.sample_job import check_sample_job

        record, report = check_sample_job(
            request.problem, request.solution, request.device, request.mode, request.budget_s
        )
        _write(out.with_name(SAMPLE_REPORT), report)
        _write(out, record)
        return 0
    problem = unpack_problem(request.problem, Path(request.cache))
    # the problem's limit for the mode, capped by the runner's own
    timeout_s = min(request.timeout_s, problem.spec.time_limit_for(request.mode))
    options = RunOptions(
        device=request.device, mode=request.mode, seed=request.seed, timeout_s=timeout_s, budget_s=request.budget_s
    )
    record = evaluate(
        problem,
        request.solution,
        options,
        progress=lambda text: print(text, file=sys.stderr, flush=True),
        worker=worker,
    )
    _write(out, record)
    return 0


def is_app_target(problem: PackedProblem) -> bool:
    """A migration target (a golden folder packed by gpuarena.apps.target) rather than a problem folder."""
    return "golden.json" in problem.files and "problem.toml" not in problem.files


def _write(out: Path, record: BaseModel) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json())
    tmp.replace(out)


if __name__ == "__main__":
    sys.exit(main())
