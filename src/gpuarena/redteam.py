"""Running the red-team corpus: exploit solutions that must never pass, honest ones that must.

Each case is a solution file with literal metadata at module level, read with `ast` (a case
is hostile code: the supervisor never imports it):

    FAMILY = "cached outputs"         # the exploit family
    EXPECT = ["WRONG_VALUES"]         # acceptable verdicts (honest cases: ["PASSED"])
    PROBLEM = "level1/softmax"        # optional; a bundled id, or a folder relative to the
                                      # case's folder or the repository holding the corpus
    DEVICES = ["cpu", "cuda"]         # optional; where the case applies
    MODE = "benchmark"                # optional
    WORKLOADS = ["small-64x1000"]     # optional
    MAX_SCORE = 1.5                   # optional: a PASSED verdict counts only at this score
                                      # or less (work moved, never hidden, gains nothing)

Cases are hostile: some try to outlive the run (processes whose pids they record in
$TMPDIR/gpuarena-redteam-leaks/) or to lower the caller's CPU share. `run_case` kills the
former by pid before and after every case and restores this process's affinity and
priority, so one case cannot poison the next (the CLI and the tests both go through it).
"""

from __future__ import annotations

import ast
import os
import signal
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuarena.contracts.records import Mode
    from gpuarena.harness.evaluator import Evaluator

LEAKS = Path(tempfile.gettempdir()) / "gpuarena-redteam-leaks"
"""Where cases record the pids of processes they leave behind (one empty file per pid)."""

DEFAULTS: dict[str, Any] = {
    "PROBLEM": "level1/softmax",
    "DEVICES": ["cpu", "cuda"],
    "MODE": "benchmark",
    "WORKLOADS": None,
    "TIMEOUT": 60.0,
    "MAX_SCORE": None,
}


@dataclass
class Case:
    path: Path
    family: str
    expect: list[str]
    problem: str
    devices: list[str]
    mode: Mode
    workloads: list[str] | None
    timeout: float
    honest: bool = False
    max_score: float | None = None
    """Where a case may pass: the highest score a pass may have (an exploit that gains nothing)."""

    @property
    def name(self) -> str:
        return self.path.stem if self.path.is_file() else self.path.name


@dataclass
class Outcome:
    case: Case
    got: str
    reason: str
    ok: bool
    details: dict[str, Any] = field(default_factory=dict)


def read_metadata(path: Path) -> dict[str, Any]:
    """Top-level literal assignments of the case's main file, without running it."""
    main = path / "solve.py" if path.is_dir() else path
    tree = ast.parse(main.read_text(), filename=str(main))
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.isupper():
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return found


def load_cases(corpus: Path) -> list[Case]:
    """Every case under `corpus`: each .py file, but those of a problem folder (one holding a
    problem.toml: the problems cases name travel with the corpus in the wheel)."""
    cases = []
    for path in sorted(
        p
        for p in corpus.rglob("*.py")
        if p.parent.name != "__pycache__"
        and not p.name.startswith("_")
        and not any((corpus / folder / "problem.toml").is_file() for folder in p.relative_to(corpus).parents)
    ):
        meta = {**DEFAULTS, **read_metadata(path)}
        if "FAMILY" not in meta or "EXPECT" not in meta:
            raise ValueError(f"{path}: a red-team case needs FAMILY and EXPECT at module level")
        expect = [meta["EXPECT"]] if isinstance(meta["EXPECT"], str) else list(meta["EXPECT"])
        cases.append(
            Case(
                path=path,
                family=meta["FAMILY"],
                expect=expect,
                problem=meta["PROBLEM"],
                devices=list(meta["DEVICES"]),
                mode=meta["MODE"],
                workloads=meta["WORKLOADS"],
                timeout=float(meta["TIMEOUT"]),
                honest=expect == ["PASSED"] and meta["MAX_SCORE"] is None,
                max_score=None if meta["MAX_SCORE"] is None else float(meta["MAX_SCORE"]),
            )
        )
    return cases


def kill_leaked_processes() -> list[int]:
    """Kill, by pid, the processes that cases recorded as leaked (if they still run a case's
    program), and make the record folder writable by workers of any user (sticky, like /tmp)."""
    killed: list[int] = []
    try:
        LEAKS.mkdir(exist_ok=True)
        if LEAKS.stat().st_uid == os.geteuid():
            os.chmod(LEAKS, 0o1777)
    except OSError:
        pass
    if not LEAKS.is_dir():
        return killed
    for entry in LEAKS.iterdir():
        try:
            pid = int(entry.name)
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (ValueError, OSError):
            cmdline = b""
            pid = 0
        if pid and (b"gpuarena-redteam-leak" in cmdline or b"gpuarena.harness" in cmdline):
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            entry.unlink()
        except OSError:
            pass
    return killed


def _autogroup_nice() -> int | None:
    try:
        return int(Path("/proc/self/autogroup").read_text().split("nice")[1])
    except (OSError, IndexError, ValueError):
        return None


class Scheduling:
    """This process's CPU affinity, nice value and autogroup nice, to put back after a case."""

    def __init__(self) -> None:
        self.affinity = os.sched_getaffinity(0)
        self.nice = os.getpriority(os.PRIO_PROCESS, 0)
        self.group_nice = _autogroup_nice()

    def restore(self) -> None:
        steps: list[Callable[[], object]] = [
            lambda: os.sched_setaffinity(0, self.affinity),
            lambda: os.setpriority(os.PRIO_PROCESS, 0, self.nice),
        ]
        if self.group_nice is not None:
            steps.append(lambda: Path("/proc/self/autogroup").write_text(str(self.group_nice)))
        for step in steps:
            try:
                step()
            except OSError:
                pass


def problem_location(case: Case) -> str:
    """The case's PROBLEM: a folder relative to the case's folder or to the repository (or
    corpus) that holds it, whatever the current directory; else a bundled problem id."""
    name = case.problem
    if Path(name).is_absolute():
        return name
    folder = case.path.parent
    for base in (folder, *folder.parents):
        candidate = base / name
        if (candidate / "problem.toml").is_file():
            return str(candidate)
        if (base / "pyproject.toml").is_file() or (base / ".git").exists():
            break
    return name


def run_case(case: Case, device: str, budget_s: float = 0.3, evaluator: Evaluator | None = None) -> Outcome:
    """Judge one case through the real harness, cleaning up after it (see the module docstring).
    evaluator: the warm path (harness/evaluator.py) for a series of cases, whose next case's
    worker starts ahead; each case still has a fresh worker of its own."""
    scheduling = Scheduling()
    kill_leaked_processes()
    try:
        return _run_case(case, device, budget_s, evaluator)
    finally:
        kill_leaked_processes()
        scheduling.restore()


def _run_case(case: Case, device: str, budget_s: float, evaluator: Evaluator | None) -> Outcome:
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    problem = resolve_problem(problem_location(case))
    workloads = case.workloads
    if workloads is None:
        kind = "cuda" if device.startswith("cuda") else "cpu"
        workloads = [w.name for w in problem.spec.workloads_for(kind)][:1]
    options = RunOptions(device=device, mode=case.mode, timeout_s=case.timeout, budget_s=budget_s, workloads=workloads)
    solution = load_solution(case.path)
    record = evaluate(problem, solution, options) if evaluator is None else evaluator.judge(problem, solution, options)
    got = record.status.value
    ok = got in case.expect
    reason = record.reason
    if ok and got == "PASSED" and case.max_score is not None and (record.score or 0.0) > case.max_score:
        ok, reason = False, f"passed with score {record.score:.2f}, above the {case.max_score:g} it may gain"
    return Outcome(
        case=case,
        got=got,
        reason=reason,
        ok=ok,
        details={
            "score": record.score,
            "workloads": [w.name for w in record.workloads],
            "device_audits": [
                w.device_audit.model_dump(exclude_defaults=True) for w in record.workloads if w.device_audit
            ],
        },
    )
