"""Run one job in a process of its own: the job (with a ranked run's secret seed) arrives on
stdin, the Evaluation is written to the file the job names. A crash here never takes the
runner down, and the runner can stop a job by killing this process group. The harness (and
torch) is imported and the worker started before the job is read, so a runner can start this
process ahead of its next job and hand it the job when one comes.

    python -m gpuarena.runner.execute < job.json

Started with SERVE_ENV=1 it serves: kernel jobs one after another, each a line on stdin, judged
by the harness's Evaluator as `gpuarena run-many` judges (workers waiting with their CUDA
contexts made, the PM sampler kept from one job to the next), until stdin closes, SERVE_JOBS
have been judged or a job of another kind has run. Each job still gets a worker of its own,
started with nothing of any problem or solution in it; a job that fails the process ends it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from gpuarena.contracts.packed import PackedProblem
from gpuarena.contracts.records import Mode
from gpuarena.contracts.wire import JobKind
from gpuarena.solutions.model import Solution


class ExecuteRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: JobKind
    """What the job runs: the claimed job's kind, told by the service (RUNS below)."""
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
SERVE_ENV = "GPUARENA_JOB_SERVE"
SERVE_JOBS = 200
"""Kernel jobs a serving process judges before it leaves and the runner starts a fresh one: a
bound on what one process gathers (its caches, torch's allocator) over a long contest."""

if TYPE_CHECKING:
    from gpuarena.contracts.records import Evaluation
    from gpuarena.harness.judge import Progress, RunOptions
    from gpuarena.harness.launch.started import StartedWorker
    from gpuarena.problems.loader import Problem

    Judging = Callable[[Problem, Solution, RunOptions, Progress | None], Evaluation]


PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
STOP_GRACE_S = 5.0
"""After the runner's SIGTERM, how long the job may take to unwind (its supervisor stopping its
worker) before its processes are killed; less than the runner's own grace (agent.STOP_GRACE_S)."""

_stop_asked = threading.Event()


def _prctl(option: int, value: int) -> bool:
    import ctypes

    try:
        return int(ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _stop(*_: object) -> None:
    """SIGTERM (the runner stops the job): unwind, so the supervisor stops its worker; the guard
    kills what is left after STOP_GRACE_S."""
    _stop_asked.set()
    sys.exit(143)


def _descendants(pid: int) -> list[int]:
    """The live processes below pid (zombies left out), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_descendants(limit_s: float = 10.0) -> None:
    """SIGKILL every process below this one, again until none is left: this process is a child
    subreaper, so the orphans of those killed (a solution's double forks, a sandbox's worker)
    come back to it and are found on the next pass."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = _descendants(os.getpid())
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        while True:  # reap the children killed (their Popen objects are of no use any more)
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
        time.sleep(0.01)


def _guard(runner: int) -> None:
    """Kill the job's processes and exit at once when the runner dies (no one would post the
    result, and they would hold the device the restarted runner gives the next job), or when
    the runner asked the job to stop and it has not finished unwinding after STOP_GRACE_S."""
    try:
        pidfd: int | None = os.pidfd_open(runner)
    except (AttributeError, OSError):
        pidfd = None
    if os.getppid() != runner:  # it died before we looked (the pidfd may be of another process)
        kill_descendants()
        os._exit(143)
    stop_at: float | None = None
    while True:
        if pidfd is not None:
            gone = bool(select.select([pidfd], [], [], 0.2)[0])
        else:
            time.sleep(0.1)
            gone = False
        if gone or os.getppid() != runner:
            break
        if _stop_asked.is_set():
            stop_at = stop_at or time.monotonic() + STOP_GRACE_S
            if time.monotonic() > stop_at:
                break
    kill_descendants()
    os._exit(143)


def watch_the_runner() -> None:
    """Make the job's processes die with the runner that started this process (Linux).

    Until the guard thread watches, the kernel kills this process outright if the runner dies
    (PR_SET_PDEATHSIG; nothing of the job runs yet); from then on the guard kills every process
    of the job first, then exits: this process is their child subreaper, so even processes
    that left their parent (double forks, setsid) are found."""
    runner = os.environ.get("GPUARENA_RUNNER_PID")
    if not runner or not sys.platform.startswith("linux"):
        return
    if not _prctl(PR_SET_PDEATHSIG, signal.SIGKILL):
        return
    if os.getppid() != int(runner):  # the runner died before the prctl
        os._exit(143)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    threading.Thread(target=_guard, args=(int(runner),), name="runner-guard", daemon=True).start()
    _prctl(PR_SET_PDEATHSIG, 0)  # the guard kills the job's processes before this one exits


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    watch_the_runner()  # before the harness is imported: the runner may die meanwhile
    from gpuarena.harness import judge  # noqa: F401  (torch and the harness, before the worker starts)
    from gpuarena.harness.launch.started import StartedWorker

    if os.environ.get(SERVE_ENV) == "1":
        return serve_jobs()
    # the worker starts (its guards, its interpreter, torch) while the job is still on its way
    worker = StartedWorker(gpu=os.environ.get("GPUARENA_JOB_DEVICE", "cuda") != "cpu")
    request = ExecuteRequest.model_validate_json(sys.stdin.buffer.read())
    RUNS[request.kind](request, worker)
    return 0


def serve_jobs() -> int:
    """Jobs from stdin, one a line, until it closes (SERVE_ENV, see the module)."""
    from gpuarena.harness.evaluator import Evaluator
    from gpuarena.harness.launch.started import StartedWorker

    device = os.environ.get("GPUARENA_JOB_DEVICE", "cuda")
    with Evaluator(device) as evaluator:  # its workers start (and make their CUDA contexts) now
        for _ in range(SERVE_JOBS):
            line = sys.stdin.buffer.readline()
            if not line.strip():
                return 0
            request = ExecuteRequest.model_validate_json(line)
            if request.kind != "kernel":  # runs by its own entry, and the process ends with it
                evaluator.close()
                RUNS[request.kind](request, StartedWorker(gpu=device != "cpu"))
                return 0
            judge = evaluator.judge if request.device == evaluator.device else None
            run_kernel(request, judge=judge)
    return 0


def run_app(request: ExecuteRequest, worker: StartedWorker) -> None:
    """A port of a whole application, held to its golden run (migration)."""
    worker.close()  # a port runs as its own sandboxed processes, not in a kernel worker
    from gpuarena.migration.job import evaluate_app

    record = evaluate_app(
        request.problem,
        request.solution,
        request.device,
        request.mode,
        Path(request.cache),
        timeout_s=request.timeout_s,
    )
    _write(Path(request.out), record)


def run_sample(request: ExecuteRequest, worker: StartedWorker) -> None:
    """A community sample, checked against the dataset; its report beside the record."""
    worker.close()  # the check starts the harness's workers for the sample's kernels itself
    from gpuarena.dataset.sample_job import check_sample_job

    record, report = check_sample_job(request.problem, request.solution, request.device, request.mode, request.budget_s)
    _write(Path(request.out).with_name(SAMPLE_REPORT), report)
    _write(Path(request.out), record)


def run_kernel(request: ExecuteRequest, worker: StartedWorker | None = None, judge: Judging | None = None) -> None:
    """A kernel judged on a problem by the harness, in the worker started ahead (or by `judge`:
    a serving process's Evaluator)."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems.pack import unpack_problem

    out = Path(request.out)
    problem = unpack_problem(request.problem, Path(request.cache))
    # the problem's limit for the mode, capped by the runner's own
    timeout_s = min(request.timeout_s, problem.spec.time_limit_for(request.mode))
    options = RunOptions(
        device=request.device, mode=request.mode, seed=request.seed, timeout_s=timeout_s, budget_s=request.budget_s
    )

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    # a problem written unchecked is checked here first (harness/problem_pending.py)
    if judge is not None:
        record = judge(problem, request.solution, options, progress)
    else:
        record = evaluate(problem, request.solution, options, progress=progress, worker=worker)
    _write(out, record)


RUNS: dict[JobKind, Callable[[ExecuteRequest, StartedWorker], None]] = {
    "kernel": run_kernel,
    "app": run_app,
    "sample": run_sample,
}
"""Each job kind's entry (contracts.wire.JobKind: the test checks that every kind has one)."""


def _write(out: Path, record: BaseModel) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(record.model_dump_json())
    tmp.replace(out)


if __name__ == "__main__":
    try:
        code = main()
    finally:
        if _stop_asked.is_set():  # stopped: nothing of the job outlives it
            kill_descendants()
    sys.exit(code)
