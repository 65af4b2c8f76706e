"""An app job on a runner: a port (a solution of language "app") checked against a migration
target (a problem of kind "app") on the runner's device, as one Evaluation record the service
stores like any other. The migration report rides in `Evaluation.migration`; the score is the
ccf-migration points, so leaderboards and contests read the same figure as `gpuarena app check`."""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from pathlib import Path

from gpuarena.contracts.packed import PackedProblem
from gpuarena.contracts.records import Evaluation, Mode, Status
from gpuarena.errors import GpuarenaError
from gpuarena.harness.launch import containment
from gpuarena.migration.check import check
from gpuarena.migration.model import AppError, load_app
from gpuarena.migration.report import MigrationReport
from gpuarena.migration.target import unpack_golden, write_port
from gpuarena.solutions.model import Solution

LOG_BYTES = 16_384


def _status(report: MigrationReport) -> Status:
    """PASSED when the port ran (its points then come from the outputs and the speed-up); TIMEOUT
    when a run passed the time limit; else RUNTIME_ERROR."""
    if report.ran:
        return Status.PASSED
    return Status.TIMEOUT if any(r.timed_out for r in report.runs) else Status.RUNTIME_ERROR


def _reason(report: MigrationReport) -> str:
    s = report.score
    matched = sum(o.matched for o in report.outputs)
    if not report.ran:
        return f"the port did not run: {report.reason}"
    return (
        f"{s.total} points = {s.running} ran + {s.matching} match ({matched} of {len(report.outputs)} outputs "
        f"matched) + {s.speed} speed-up"
    )


def _log(report: MigrationReport) -> str:
    parts = []
    for i, run in enumerate(report.runs):
        if run.stdout_tail or run.stderr_tail:
            parts.append(
                f"--- run {i + 1}: {' '.join(run.command)} (exit {run.exit_code})\n{run.stdout_tail}{run.stderr_tail}"
            )
    return "\n".join(parts)[-LOG_BYTES:]


class SandboxMissing(RuntimeError):
    """A ranked check on a runner that cannot sandbox apps: the runner's failure, not the port's."""


def evaluate_app(
    problem: PackedProblem, solution: Solution, device: str, mode: Mode, cache: Path, timeout_s: float = 600.0
) -> Evaluation:
    """Check the port against the target's golden record; every failure of the port is a verdict.

    A ranked check needs the sandbox: without it a port could read the runner's copy of the
    golden outputs and hand them back as its own. Such a runner raises SandboxMissing, so the
    job goes back to the queue for another runner instead of getting a verdict. A port whose
    app.toml may take longer than timeout_s in all (time_limit_s for each setup command and each
    run) is refused before it runs: a runner's time is not the port's to set. A ranked check's
    speed-up compares wall times gpuarena measured, never the port's own figure (a port could
    print any number)."""
    if mode == "ranked" and (why := containment.sandbox_problem()):
        raise SandboxMissing(f"a ranked migration check needs the sandbox, and this runner has none: {why}")
    started, t0 = dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), time.monotonic()
    try:
        golden = unpack_golden(problem, cache)
        with tempfile.TemporaryDirectory(prefix="gpuarena-port-") as root:
            port = write_port(solution, Path(root) / "port")
            spec = load_app(port)
            asked = spec.time_limit_s * (spec.repeats + len(spec.setup))
            if asked > timeout_s:
                raise AppError(
                    f"app.toml asks for up to {asked:g} s (time_limit_s {spec.time_limit_s:g} x "
                    f"{spec.repeats} runs and {len(spec.setup)} setup commands); this runner gives a check "
                    f"at most {timeout_s:g} s: lower time_limit_s or repeats"
                )
            report = check(port, golden, device, outside_timing=mode == "ranked")
    except GpuarenaError as exc:
        return solution.record(
            problem.id,
            device,
            mode,
            started_at=started,
            status=Status.COMPILE_ERROR,
            reason=str(exc),
            duration_s=time.monotonic() - t0,
        )
    return solution.record(
        problem.id,
        device,
        mode,
        started_at=started,
        status=_status(report),
        reason=_reason(report),
        score=float(report.score.total),
        log=_log(report),
        migration=report.model_dump(mode="json"),
        duration_s=time.monotonic() - t0,
    )
