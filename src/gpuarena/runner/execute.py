"""Run one job in a process of its own: the job (with a ranked run's secret seed) arrives on
stdin, the Evaluation is written to the file named on the command line. A crash here never
takes the runner down, and the runner can stop a job by killing this process group.

    python -m gpuarena.runner.execute OUT.json < job.json
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict

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


def main() -> int:
    from gpuarena.harness.supervisor import RunOptions, evaluate
    from gpuarena.problems.pack import unpack_problem

    # the runner stops a job with SIGTERM: unwind, so the supervisor stops its worker
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(sys.argv[1])
    request = ExecuteRequest.model_validate_json(sys.stdin.buffer.read())
    problem = unpack_problem(request.problem, Path(request.cache))
    options = RunOptions(device=request.device, mode=request.mode, seed=request.seed, timeout_s=request.timeout_s,
                         budget_s=request.budget_s)
    record = evaluate(problem, request.solution, options, progress=lambda text: print(text, file=sys.stderr, flush=True))
    tmp = out.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json())
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
