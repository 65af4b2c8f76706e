"""A problem not yet checked on a kind of device is checked by its first run there (issue 49:
"a GPU-sized problem is a problem").

An importer runs `gpuarena check` where it imports. A problem whose workloads all need a GPU
cannot be checked on a machine without one, yet it is a problem: the importer writes it with
`unchecked = ["cuda"]` in problem.toml, and the first run on a CUDA device, by any path into the
judge (evaluate takes the check: `gpuarena run`, run-many, run-stdin, a runner's job, the suite,
the red-team corpus), checks it there before judging anything. A problem that fails gets no verdict on
that device (ERROR, naming what the check found), so a degenerate problem never ranks anyone; one
that passes is noted in the cache, keyed by its content and the device type, and is not checked
again on this machine. `gpuarena check` passing there notes it too.
"""

from __future__ import annotations

from pathlib import Path

from gpuarena.cache import cache_dir
from gpuarena.contracts.records import Evaluation, Mode
from gpuarena.contracts.status import Status
from gpuarena.harness.problem_check import CheckReport, check_problem
from gpuarena.problems.loader import Problem
from gpuarena.problems.pack import pack_problem
from gpuarena.solutions.model import Solution

SHOWN_FINDINGS = 3
"""Findings quoted in the record's reason; the log has them all."""


def _note(problem: Problem, device_type: str) -> Path:
    return cache_dir() / "checked-problems" / f"{pack_problem(problem).hash}-{device_type}"


def pending(problem: Problem, device_type: str) -> bool:
    """Whether the problem still has to pass its check on this device type before a run."""
    return device_type in problem.spec.unchecked and not _note(problem, device_type).is_file()


def note_passed(problem: Problem, device_type: str, report: CheckReport) -> None:
    """Keep a pass (of the problem as it is now) on this machine; a failure is not kept."""
    if report.ok and device_type in problem.spec.unchecked:
        note = _note(problem, device_type)
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(report.summary + "\n")


def check_first(problem: Problem, solution: Solution, device: str, mode: Mode) -> Evaluation | None:
    """Check the problem here if it is pending on this device: None when it may be judged (now
    or all along), else the record of the run that cannot be."""
    device_type = device.split(":", 1)[0]
    if not pending(problem, device_type):
        return None
    report = check_problem(problem.path, device)
    note_passed(problem, device_type, report)
    if report.ok:
        return None
    shown = "; ".join(report.errors[:SHOWN_FINDINGS])
    more = len(report.errors) - SHOWN_FINDINGS
    return solution.record(
        problem.id,
        device,
        mode,
        status=Status.ERROR,
        reason=(
            f"{problem.id} had not passed `gpuarena check` on {device_type} (it was written where it could "
            f"not be checked) and fails it here, so nothing is judged on it: {shown}"
            + (f" (and {more} more)" if more > 0 else "")
        ),
        log="\n".join(report.errors),
    )
