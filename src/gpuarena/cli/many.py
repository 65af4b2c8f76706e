"""`gpuarena run-many` and `gpuarena run-stdin`: many verdicts from one process (the warm path).

`run-many PROBLEM SOLUTION...` judges a list of solutions; `run-stdin` judges what an agent
sends, one JSON object a line, and answers each with one line, as soon as it is judged:

    {"id": 7, "problem": "level1/softmax", "solution": "cand7.py", "mode": "benchmark",
     "workloads": ["square-8192"], "timeout": 60, "budget": 2.0, "ncu": false}
    -> {"id": 7, "status": "PASSED", "score": 1.12, "seconds": 3.1, "record": {...}}
    -> {"id": 8, "error": "..."}                       (a request that could not be judged)

Only `problem` and `solution` are required; a bad line gets an error line, never an exit.
Both commands are harness/evaluator.py's Evaluator: the process's start is paid once and each
run's worker is started before its job; each solution still has a worker of its own.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer
from rich.console import Console

from gpuarena.cli.devices import check_device, default_device
from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    from gpuarena.contracts.records import Mode

MODES = ("test", "benchmark", "ranked")
err = Console(stderr=True)


class Judge:
    """One device's Evaluator with the problems it has loaded (a problem is loaded once)."""

    def __init__(self, device: str, ahead: int | None = None):
        from gpuarena.harness.evaluator import Evaluator

        self.device = device
        self.evaluator = Evaluator(device, ahead)
        self._problems: dict[str, Any] = {}

    def __enter__(self) -> Judge:
        self.evaluator.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.evaluator.close()

    def one(
        self,
        problem: str,
        solution: str | Path,
        mode: str = "benchmark",
        workloads: list[str] | None = None,
        timeout: float | None = None,
        budget: float = 2.0,
        ncu: bool | None = None,
    ) -> dict[str, Any]:
        """The answer to one request: status, score, wall seconds and the record; GpuarenaError
        for a request that cannot be judged (unknown problem or workload, unreadable solution)."""
        import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
        from gpuarena.harness.supervisor import RunOptions
        from gpuarena.problems import resolve_problem
        from gpuarena.solutions import load_solution

        if mode not in MODES:
            raise GpuarenaError(f"mode must be test, benchmark or ranked, not {mode!r}")
        if problem not in self._problems:
            self._problems[problem] = resolve_problem(problem)
        loaded = self._problems[problem]
        unknown = set(workloads or []) - {w.name for w in loaded.spec.workloads}
        if unknown:
            raise GpuarenaError(f"workload(s) {', '.join(sorted(unknown))} not in {loaded.id}")
        options = RunOptions(
            device=self.device,
            mode=cast("Mode", mode),  # one of MODES, checked above
            timeout_s=timeout or loaded.spec.time_limit_for(mode),
            budget_s=budget,
            workloads=workloads or None,
            kernel_duration=ncu,
        )
        started = time.monotonic()
        record = self.evaluator.judge(loaded, load_solution(Path(solution)), options)
        return {
            "status": record.status.value,
            "score": record.score,
            "seconds": round(time.monotonic() - started, 3),
            "record": record.model_dump(mode="json"),
        }


def _device(device: str | None) -> str:
    device = device or default_device()
    try:
        check_device(device)
    except GpuarenaError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from exc
    return device


def run_many(
    problem: Annotated[str, typer.Argument(help="Problem folder or bundled id, e.g. level1/softmax")],
    solutions: Annotated[list[Path], typer.Argument(help="Solutions: .py files, folders with solution.toml, or packs")],
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (default: cuda if present)")] = None,
    mode: Annotated[str, typer.Option(help="test, benchmark or ranked")] = "benchmark",
    workload: Annotated[list[str] | None, typer.Option(help="Only this workload (repeatable)")] = None,
    timeout: Annotated[float | None, typer.Option(help="Limit per run, in seconds [default: the problem's]")] = None,
    budget: Annotated[float, typer.Option(help="Timing budget per workload, in seconds")] = 2.0,
    ncu: Annotated[
        bool | None, typer.Option("--ncu/--no-ncu", help="Read ncu's Duration on every timed workload [default: off]")
    ] = None,
    jsonl: Annotated[bool, typer.Option("--jsonl", help="One JSON object a line on stdout (with the records)")] = False,
    ahead: Annotated[int | None, typer.Option(help="Workers started ahead [default: 2 on a GPU, 1 on the CPU]")] = None,
) -> None:
    """Judge many SOLUTIONS on PROBLEM in one process: the start is paid once, each next worker is
    started ahead (each solution still runs in a worker of its own)."""
    device = _device(device)
    failed = False
    with Judge(device, ahead) as judge:
        for index, solution in enumerate(solutions):
            try:
                answer = judge.one(problem, solution, mode, workload, timeout, budget, ncu)
            except GpuarenaError as exc:
                answer = {"error": str(exc)}
            failed |= answer.get("status") != "PASSED"
            if jsonl:
                sys.stdout.write(json.dumps({"index": index, "solution": str(solution), **answer}) + "\n")
                sys.stdout.flush()
            else:
                score = answer.get("score")
                verdict = answer.get("status") or "error: " + answer["error"]
                sys.stdout.write(
                    f"{solution}\t{verdict}\t{'' if score is None else f'{score:.4g}'}\t{answer.get('seconds', '')}\n"
                )
                sys.stdout.flush()
    raise typer.Exit(1 if failed else 0)


def run_stdin(
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (default: cuda if present)")] = None,
    ahead: Annotated[int | None, typer.Option(help="Workers started ahead [default: 2 on a GPU, 1 on the CPU]")] = None,
) -> None:
    """Judge requests read from stdin, one JSON object a line (problem, solution, and optionally
    id, mode, workloads, timeout, budget, ncu); one JSON answer a line on stdout, in order."""
    device = _device(device)
    with Judge(device, ahead) as judge:
        for line in sys.stdin:
            if not line.strip():
                continue
            answer: dict[str, Any] = {"id": None}
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise GpuarenaError("a request is a JSON object")
                answer["id"] = request.get("id")
                missing = [k for k in ("problem", "solution") if not isinstance(request.get(k), str)]
                if missing:
                    raise GpuarenaError(f"missing or not a string: {', '.join(missing)}")
                workloads = request.get("workloads")
                if workloads is not None and not (
                    isinstance(workloads, list) and all(isinstance(w, str) for w in workloads)
                ):
                    raise GpuarenaError("workloads is a list of workload names")
                answer.update(
                    judge.one(
                        request["problem"],
                        request["solution"],
                        request.get("mode", "benchmark"),
                        workloads,
                        request.get("timeout"),
                        float(request.get("budget", 2.0)),
                        request.get("ncu"),
                    )
                )
            except json.JSONDecodeError as exc:
                answer["error"] = f"not JSON: {exc}"
            except (GpuarenaError, TypeError, ValueError) as exc:
                answer["error"] = str(exc)
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()


def register(app: typer.Typer) -> None:
    app.command("run-many")(run_many)
    app.command("run-stdin")(run_stdin)
