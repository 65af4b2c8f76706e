"""The `gpuarena` command."""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, cast

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from gpuarena import __version__
from gpuarena.cli import (
    bounty_cli,
    dataset_cli,
    early,
    interop_cli,
    languages_cli,
    many,
    migration_cli,
    service_cli,
    suite_cli,
)
from gpuarena.cli.console import SERVER_MODULES, err, fail, out, server_missing
from gpuarena.cli.devices import check_device as _check_device
from gpuarena.cli.devices import default_device
from gpuarena.cli.problem_filters import Level, Match, Model, Source, Tag
from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    from gpuarena.contracts.records import Mode

app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="gpuarena: trustworthy verdicts and honest timing for GPU kernels.",
)
new_app = typer.Typer(no_args_is_help=True, help="Scaffold a problem or a solution that passes out of the box.")
app.add_typer(new_app, name="new")


@app.command()
def run(
    problem: Annotated[str, typer.Argument(help="Problem folder or bundled id, e.g. level1/softmax")],
    solution: Annotated[Path, typer.Argument(help="solve() in a .py file, a folder with solution.toml, or a pack")],
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (default: cuda if present)")] = None,
    mode: Annotated[
        str,
        typer.Option(
            help="test (correctness), benchmark (and timing), ranked (secret seed), profile (Nsight Compute on one workload)"
        ),
    ] = "benchmark",
    timeout: Annotated[
        float | None, typer.Option(help="Limit for the whole run, in seconds [default: the problem's for the mode]")
    ] = None,
    workload: Annotated[list[str] | None, typer.Option(help="Only this workload (repeatable)")] = None,
    budget: Annotated[float, typer.Option(help="Timing budget per workload, in seconds")] = 2.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the Evaluation record as JSON on stdout")] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Also show where the run's time went, per phase")
    ] = False,
    ncu: Annotated[
        bool | None,
        typer.Option(
            "--ncu/--no-ncu",
            help="Read ncu's Duration for both sides after timing, on every timed workload (CUDA; the worker's own reading, it ranks nothing) [default: off]",
        ),
    ] = None,
    profile_out: Annotated[
        Path, typer.Option(help="Profile mode: where the .ncu-rep reports and roofline.svg go")
    ] = Path("gpuarena-profile"),
) -> None:
    """Judge SOLUTION on PROBLEM: correctness on fresh inputs, then timing against the reference
    (--mode profile: both sides' kernels under Nsight Compute instead, on one workload)."""
    if mode not in ("test", "benchmark", "ranked", "profile"):
        fail(ValueError(f"--mode must be test, benchmark, ranked or profile, not {mode!r}"))
    if mode == "profile":
        from gpuarena.cli.profile_cli import run_profile_command

        run_profile_command(problem, solution, device, workload, timeout, json_out, profile_out)
        return
    global _LEAVE_FAST
    _LEAVE_FAST = True
    ahead = early.take(device)  # its imports overlap this process's own (torch: seconds)
    device_ahead = _device_ahead(device, mode)  # and so do the device's sampler and reading
    try:
        _run(problem, solution, device, mode, timeout, workload, budget, json_out, verbose, ahead, ncu, device_ahead)
    finally:
        if ahead is not None and ahead.alive():  # not taken by the run (a bad argument, say)
            ahead.close()
        if device_ahead is not None:
            device_ahead.close()


def _device_ahead(device: str | None, mode: str):
    """The PM sampler (benchmark and ranked modes) and nvidia-smi's reading of the run's GPU,
    started now, before torch is imported here (harness/launch/ahead.py); None on the CPU."""
    target = device or ("cuda" if Path("/dev/nvidiactl").exists() else "cpu")
    if not target.startswith("cuda"):
        return None
    from gpuarena.harness.launch.ahead import DeviceAhead

    try:
        return DeviceAhead(int(target.split(":", 1)[1]) if ":" in target else 0, sampler=mode != "test")
    except ValueError:  # cuda:x: the run's own check says what is wrong
        return None


def _run(
    problem: str,
    solution: Path,
    device: str | None,
    mode: str,
    timeout: float | None,
    workload: list[str] | None,
    budget: float,
    json_out: bool,
    verbose: bool,
    ahead,
    ncu: bool | None = None,
    device_ahead=None,
) -> None:
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.cli.render import render
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    try:
        loaded_problem = resolve_problem(problem)
        loaded_solution = load_solution(solution)
        device = device or default_device()
        _check_device(device)
        unknown = set(workload or []) - {w.name for w in loaded_problem.spec.workloads}
        if unknown:
            names = ", ".join(w.name for w in loaded_problem.spec.workloads)
            raise GpuarenaError(
                f"--workload {', '.join(sorted(unknown))}: not in {loaded_problem.id} (it has: {names})"
            )
    except GpuarenaError as exc:
        fail(exc)
    limit = timeout or loaded_problem.spec.time_limit_for(mode)
    err.print(
        f"{loaded_problem.id}: time limit {limit:.0f} s in {mode} mode"
        f"{'' if timeout else ' (the problem’s; --timeout sets another)'}",
        highlight=False,
    )
    options = RunOptions(
        device=device,
        mode=cast("Mode", mode),  # run checked it is one of the modes
        timeout_s=limit,
        budget_s=budget,
        workloads=workload or None,
        kernel_duration=ncu,
    )
    with err.status("starting") as status:
        record = evaluate(
            loaded_problem,
            loaded_solution,
            options,
            progress=lambda text: status.update(text),
            worker=ahead,
            ahead=device_ahead,
        )
    if json_out:
        sys.stdout.write(record.model_dump_json(indent=2) + "\n")
    else:
        render(record, out, verbose=verbose)
    raise typer.Exit(0 if record.status.value == "PASSED" else 1)


@app.command()
def check(
    problems: Annotated[
        list[Path], typer.Argument(help="Problem folders, bundled ids (level1/softmax), or a folder holding many")
    ],
    device: Annotated[str, typer.Option(help="Device to run the reference on")] = "cpu",
    match: Match = None,
    level: Level = None,
    tag: Tag = None,
    model: Model = None,
    source: Source = None,
) -> None:
    """Validate problems: schema, reference on every workload, outputs that trivial answers cannot match."""
    from gpuarena.harness.problem_check import check_problem
    from gpuarena.harness.problem_pending import note_passed
    from gpuarena.problems.loader import PROBLEM_FILE, load_problem, problem_folder
    from gpuarena.problems.select import ProblemFilter

    folders: list[Path] = []
    for path in problems:
        if problem_folder(path) is not None:
            folders.append(problem_folder(path))  # type: ignore[arg-type]
        elif path.is_dir() and any(path.rglob(PROBLEM_FILE)):
            folders += sorted(p.parent for p in path.rglob(PROBLEM_FILE))
        else:
            folders.append(path)
    where = ProblemFilter.of(match, level, tag, model, source)
    if where:
        folders = [f for f in folders if where.admits_folder(f)]
        if not folders:
            fail(GpuarenaError(f"no problem matches the filters ({where.describe()})"))
    failed = 0
    for folder in folders:
        report = check_problem(folder, device=device)
        if report.ok:
            note_passed(load_problem(folder), device.split(":", 1)[0], report)  # a run need not check it again
            out.print(
                f"[green]ok[/]    {escape(report.name)}  ({escape(report.summary)})", markup=True, highlight=False
            )
            for seen in report.notes:
                out.print(f"      note: {seen}", highlight=False, markup=False)
        else:
            failed += 1
            out.print(f"[bold red]FAIL[/]  {escape(report.name)}", markup=True, highlight=False)
            for problem in report.errors:
                out.print(f"      - {problem}", highlight=False, markup=False)
    out.print(f"{len(folders) - failed} of {len(folders)} problems ok")
    raise typer.Exit(1 if failed else 0)


@app.command("list")
def list_problems(
    root: Annotated[Path | None, typer.Option(help="Folder of problems (default: the bundled ones)")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
    match: Match = None,
    level: Level = None,
    tag: Tag = None,
    model: Model = None,
    source: Source = None,
) -> None:
    """The bundled problems, with level, tags and weight."""
    from gpuarena.problems.loader import discover
    from gpuarena.problems.select import ProblemFilter, select

    try:
        found = discover(root)
        where = ProblemFilter.of(match, level, tag, model, source)
        if where:
            found = select(found, where)
    except GpuarenaError as exc:
        fail(exc)
    if json_out:
        rows = [
            {
                "id": p.id,
                "level": p.spec.level,
                "summary": p.spec.summary,
                "tags": p.spec.tags,
                "weight": p.spec.weight,
                "workloads": [w.name for w in p.spec.workloads],
            }
            for p in found
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table(header_style="bold")
    # ids are what a user types next: never cut; on a narrow terminal the tags go and the
    # summary is shortened instead
    wide = out.width >= 120
    id_width = max((len(p.id) for p in found), default=7)
    for column in ("problem", "level", "weight", "cpu/all", *(["tags"] if wide else []), "summary"):
        table.add_column(column, no_wrap=column != "tags" and column != "summary" or not wide, overflow="fold")
    room = max(10, out.width - id_width - len("level") - len("weight") - len("cpu/all") - 19)  # borders, padding
    for p in found:
        n_cpu = len(p.spec.workloads_for("cpu"))
        summary = p.spec.summary if wide or len(p.spec.summary) <= room else p.spec.summary[: room - 1] + "…"
        table.add_row(
            p.id,
            str(p.spec.level),
            f"{p.spec.weight:g}",
            f"{n_cpu}/{len(p.spec.workloads)}",
            *([", ".join(p.spec.tags)] if wide else []),
            summary,
        )
    out.print(table)


@app.command()
def pack(
    solution: Annotated[Path, typer.Argument(help="A .py file or a solution folder")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default: stdout)")] = None,
) -> None:
    """Write the solution as one JSON file: manifest, sources and content hash."""
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.solutions.loader import load_solution
    from gpuarena.solutions.loader import pack as pack_solution

    try:
        loaded = load_solution(solution)
    except GpuarenaError as exc:
        fail(exc)
    text = pack_solution(loaded)
    if output:
        output.write_text(text + "\n")
        err.print(f"wrote {output} (sha256 {loaded.hash})", highlight=False)
    else:
        sys.stdout.write(text + "\n")


@new_app.command("problem")
def new_problem(
    name: Annotated[str, typer.Argument(help="Folder to create, e.g. problems/level1/my_op")],
    level: Annotated[int, typer.Option(help="1 single op · 2 fusion · 3 with matmul · 4 model-level")] = 1,
) -> None:
    """A problem folder (problem.toml, reference.py, README.md) that passes `gpuarena check`."""
    from gpuarena.scaffold import write_problem

    try:
        folder = write_problem(Path(name), level)
    except GpuarenaError as exc:
        fail(exc)
    out.print(f"created {folder}/ — next: gpuarena check {folder}", highlight=False)


@new_app.command("solution")
def new_solution(
    problem: Annotated[str, typer.Argument(help="Problem folder or bundled id")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="File to write (default: solution.py)")] = None,
    language: Annotated[str, typer.Option(help="pytorch, triton or jax")] = "pytorch",
) -> None:
    """A solution file for PROBLEM with the right solve() signature; it passes as written."""
    from gpuarena.problems import resolve_problem
    from gpuarena.scaffold import write_solution

    try:
        path = write_solution(resolve_problem(problem), output or Path("solution.py"), language)
    except GpuarenaError as exc:
        fail(exc)
    out.print(f"created {path} — next: gpuarena run {problem} {path}", highlight=False)


@app.command()
def schema(
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Folder to write the schemas to")] = None,
) -> None:
    """JSON Schemas of problem.toml, solution.toml and the Evaluation record."""
    from gpuarena.schemas import all_schemas

    schemas = all_schemas()
    if output is None:
        sys.stdout.write(json.dumps(schemas, indent=2) + "\n")
        return
    output.mkdir(parents=True, exist_ok=True)
    for name, body in schemas.items():
        (output / f"{name}.schema.json").write_text(json.dumps(body, indent=2) + "\n")
    err.print(f"wrote {len(schemas)} schemas to {output}")


@app.command()
def redteam(
    corpus: Annotated[
        Path | None, typer.Option(help="Folder of red-team cases [default: the corpus shipped with gpuarena]")
    ] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda or cuda:N (default: cuda if present)")] = None,
    family: Annotated[str | None, typer.Option(help="Only cases whose family contains this text")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the outcomes as JSON")] = False,
) -> None:
    """Run the red-team corpus: every exploit must get its expected verdict, every honest case must pass."""
    from gpuarena.bundled import bundled_redteam
    from gpuarena.redteam import load_cases, run_case

    corpus = corpus or bundled_redteam()
    device = device or default_device()
    kind = "cuda" if device.startswith("cuda") else "cpu"
    try:
        cases = [c for c in load_cases(corpus) if kind in c.devices and (not family or family in c.family)]
    except (OSError, ValueError, SyntaxError) as exc:
        fail(exc)
    from gpuarena.harness.evaluator import Evaluator

    outcomes = []
    with err.status("running the corpus") as status, Evaluator(device) as evaluator:  # workers started ahead
        for i, case in enumerate(cases):
            status.update(f"[{i + 1}/{len(cases)}] {case.family}: {case.name}")
            outcomes.append(run_case(case, device, evaluator=evaluator))
    if json_out:
        rows = [
            {
                "family": o.case.family,
                "case": o.case.name,
                "expected": o.case.expect,
                "got": o.got,
                "ok": o.ok,
                "reason": o.reason,
            }
            for o in outcomes
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
    else:
        table = Table(header_style="bold")
        for column in ("family", "case", "expected", "got", "reason"):
            table.add_column(column, overflow="fold")
        for o in outcomes:
            table.add_row(
                o.case.family,
                o.case.name,
                " | ".join(o.case.expect),
                Text(o.got, style="green" if o.ok else "bold red"),
                o.reason[:120],
            )
        out.print(table)
        bad = [o for o in outcomes if not o.ok]
        out.print(f"{len(outcomes) - len(bad)} of {len(outcomes)} cases as expected on {device}")
    raise typer.Exit(1 if any(not o.ok for o in outcomes) else 0)


@app.command()
def version() -> None:
    """The package and harness version."""
    from gpuarena import HARNESS_VERSION

    out.print(f"gpuarena {__version__} ({HARNESS_VERSION})")


_LEAVE_FAST = False
"""Set by `run`: once it has printed its verdict, the process leaves without tearing its
interpreter down (harness's torch and all: 0.5-0.7 s of a one-shot run, measured with
bench/research/cli_timeline.py on an H100 and here)."""


def main() -> None:
    """The console script (in-process callers, tests among them, call `app` and exit normally)."""
    try:
        app()
    except SystemExit as exc:
        if _LEAVE_FAST:
            leave(exc.code)
        raise
    except ImportError as exc:  # a command that reached the service's packages without the extra
        if (exc.name or "").split(".")[0] not in (*SERVER_MODULES, "multipart", "starlette"):
            raise
        err.print(f"error: {server_missing(' '.join(sys.argv[1:2]) or 'gpuarena', exc.name or '')}", highlight=False)
        raise SystemExit(2) from None


def leave(code: object) -> None:
    """Exit now with `code`, as SystemExit would, after what an exit owes: other threads that
    are not daemons finished, standard streams flushed, atexit hooks run (temporary folders'
    finalizers among them). Only the interpreter's own teardown is skipped."""
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
    status = code if isinstance(code, int) else (0 if code is None else 1)
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


for module in (
    service_cli,
    interop_cli,
    many,
    bounty_cli,
    migration_cli,
    dataset_cli,
    suite_cli,
    languages_cli,
):  # the commands of the other modules
    module.register(app)
