"""`gpuarena import ...` and `gpuarena export ...`: FlashInfer-Trace in and out, KernelBench and GPU MODE in.

The modules doing the work import torch, so they are imported inside the commands: the
`gpuarena` command itself starts no slower for having these.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Literal, cast

import typer

from gpuarena.cli.console import err, fail
from gpuarena.errors import GpuarenaError

import_app = typer.Typer(
    no_args_is_help=True,
    help="Read other benchmarks' problems: FlashInfer-Trace definitions (with workloads) and solutions, KernelBench problem files, GPU MODE problem folders.",
)
export_app = typer.Typer(
    no_args_is_help=True, help="Write FlashInfer-Trace: traces of records, definitions, solutions."
)


@import_app.command("flashinfer")
def import_flashinfer(
    definition: Annotated[Path, typer.Argument(help="A FlashInfer-Trace Definition (.json)")],
    workloads: Annotated[Path, typer.Option("--workloads", "-w", help="Its workloads (.jsonl, one Trace a line)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The problem folder to write")],
    convention: Annotated[
        str, typer.Option(help="How solve() gets its outputs: destination (FlashInfer's default) or return")
    ] = "destination",
    level: Annotated[
        int | None, typer.Option(help="Problem level 1-4 [default: 2 for a definition tagged fused, else 1]")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the folder if it exists")] = False,
    verify: Annotated[
        bool, typer.Option(help="Run the reference once on the CPU to check output shapes and dtypes")
    ] = True,
    check_device: Annotated[
        str, typer.Option(help="Device `gpuarena check` runs on during the import ('none': no check)")
    ] = "cpu",
    keep_failing: Annotated[
        bool, typer.Option("--keep-failing", help="Write a problem that `gpuarena check` fails, with its findings")
    ] = False,
) -> None:
    """A gpuarena problem folder from a FlashInfer-Trace definition and its workloads, checked as
    `gpuarena check` checks it."""
    from gpuarena.interop.flashinfer_import import import_definition

    try:
        result = import_definition(
            definition,
            workloads,
            output,
            convention=convention,
            level=level,
            force=force,
            verify=verify,
            check_device=None if check_device == "none" else check_device,
            keep_failing=keep_failing,
        )
    except GpuarenaError as exc:
        fail(exc)
    for note in result.notes:
        err.print(f"note: {note}", highlight=False)
    err.print(f"wrote {result.folder}/ — next: gpuarena run {result.folder} SOLUTION", highlight=False)


@import_app.command("flashinfer-solution")
def import_flashinfer_solution(
    solution: Annotated[Path, typer.Argument(help="A FlashInfer-Trace Solution (.json)")],
    problem: Annotated[str, typer.Option("--problem", help="The problem it solves (folder or bundled id)")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="The solution folder to write [default: ./NAME]")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace the folder if it exists")] = False,
) -> None:
    """A gpuarena solution folder (solution.toml and sources) from a FlashInfer-Trace solution."""
    from gpuarena.interop.flashinfer_import import import_solution
    from gpuarena.interop.flashinfer_trace import read_solution
    from gpuarena.problems import resolve_problem

    try:
        loaded = resolve_problem(problem)
        folder = import_solution(solution, loaded, output or Path(read_solution(solution).name), force=force)
    except GpuarenaError as exc:
        fail(exc)
    err.print(f"wrote {folder}/ — next: gpuarena run {problem} {folder}", highlight=False)


def _report(outcomes: list, output: Path, what: str) -> None:
    """Each source's outcome with the check's findings; exit 1 unless every one was imported."""
    for outcome in outcomes:
        if outcome.status == "imported":
            err.print(
                f"imported {outcome.source} -> {outcome.folder}/ (workloads: {', '.join(outcome.workloads)})",
                highlight=False,
            )
        elif outcome.status == "failed-check":
            kept = f"written to {outcome.folder}/ all the same (--keep-failing)" if outcome.folder else "not imported"
            err.print(f"FAILED CHECK {outcome.source}: {kept}; `gpuarena check` says:", highlight=False)
        else:
            err.print(f"ERROR {outcome.source}: not imported", highlight=False)
        for message in outcome.messages:
            err.print(f"  {message}", highlight=False)
        for note in outcome.notes:
            err.print(f"  note: {note}", highlight=False)
    imported = sum(o.status == "imported" for o in outcomes)
    err.print(f"{imported} of {len(outcomes)} {what} imported under {output}/", highlight=False)
    if imported < len(outcomes):
        raise typer.Exit(1)


@import_app.command("kernelbench")
def import_kernelbench(
    paths: Annotated[
        list[Path],
        typer.Argument(help="KernelBench problem files (Model, get_inputs, get_init_inputs), or folders of them"),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write: OUTPUT/levelN/NAME for each problem")],
    level: Annotated[
        int | None, typer.Option(help="Problem level 1-4 [default: from a levelN folder above each file, else 1]")
    ] = None,
    dtype: Annotated[
        list[str], typer.Option("--dtype", help="Workload dtype, repeatable: float32, float16, bfloat16")
    ] = ["float32"],  # noqa: B006
    force: Annotated[bool, typer.Option("--force", help="Replace problem folders that exist")] = False,
    keep_failing: Annotated[
        bool, typer.Option("--keep-failing", help="Write problems that fail `gpuarena check` too (still reported)")
    ] = False,
    check_device: Annotated[
        str, typer.Option("--check-device", help="Device `gpuarena check` runs on during the import")
    ] = "cpu",
) -> None:
    """gpuarena problems from KernelBench problem files, each checked with `gpuarena check`;
    a KernelBench solution file (ModelNew) then runs unmodified: `gpuarena run PROBLEM FILE`."""
    from gpuarena.interop.kernelbench import import_files

    if level is not None and not 1 <= level <= 4:
        fail(ValueError(f"--level must be 1-4, not {level}"))
    outcomes = import_files(
        paths,
        output,
        level=level,
        dtypes=tuple(dtype),
        force=force,
        keep_failing=keep_failing,
        check_device=check_device,
    )
    if not outcomes:
        fail(GpuarenaError(f"no .py files in {', '.join(map(str, paths))}"))
    _report(outcomes, output, "file(s)")


@import_app.command("gpumode")
def import_gpumode(
    paths: Annotated[
        list[Path],
        typer.Argument(help="GPU MODE problem folders (task.yml, reference.py, task.py), or folders of them"),
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write: OUTPUT/levelN/NAME for each problem")],
    level: Annotated[int, typer.Option(help="Problem level 1-4")] = 1,
    atol: Annotated[
        float | None,
        typer.Option(
            help="Judge by closeness to ref_kernel's output with this atol, in place of the task's check_implementation"
        ),
    ] = None,
    rtol: Annotated[float | None, typer.Option(help="... and this rtol")] = None,
    exact: Annotated[
        bool,
        typer.Option(
            "--exact",
            help="Judge by exact equality to ref_kernel's output, in place of the task's check_implementation",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace problem folders that exist")] = False,
    keep_failing: Annotated[
        bool, typer.Option("--keep-failing", help="Write problems that fail `gpuarena check` too (still reported)")
    ] = False,
    check_device: Annotated[
        str,
        typer.Option(
            "--check-device", help="Device the task's data is probed and `gpuarena check` runs on during the import"
        ),
    ] = "cpu",
) -> None:
    """gpuarena problems from GPU MODE problem folders, each checked with `gpuarena check`;
    a GPU MODE submission (custom_kernel) then runs unmodified: `gpuarena run PROBLEM FILE`."""
    from gpuarena.interop.gpumode import import_folders

    if not 1 <= level <= 4:
        fail(ValueError(f"--level must be 1-4, not {level}"))
    outcomes = import_folders(
        paths,
        output,
        level=level,
        atol=atol,
        rtol=rtol,
        exact=exact,
        force=force,
        keep_failing=keep_failing,
        check_device=check_device,
    )
    _report(outcomes, output, "folder(s)")


@export_app.command("traces")
def export_traces(
    records: Annotated[list[Path], typer.Argument(help="Evaluation records (`gpuarena run --json` output)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The traces file to write (.jsonl)")],
    problem: Annotated[
        str | None,
        typer.Option(
            help="The problem the records judge [default: each record's own: a bundled one, else the problem "
            "folder below this one whose path ends with its name]"
        ),
    ] = None,
    solution_name: Annotated[
        str | None,
        typer.Option(
            help="The solution's name in the traces [default: the record's, which is the name `export solution` gives]"
        ),
    ] = None,
    definition: Annotated[
        str | None,
        typer.Option(help="The definition's name [default: the imported definition's, else the problem's name]"),
    ] = None,
    statistic: Annotated[str, typer.Option(help="mean (FlashInfer-Trace's latency) or median")] = "mean",
    append: Annotated[bool, typer.Option("--append", help="Add to the file instead of replacing it")] = False,
) -> None:
    """FlashInfer-Trace Trace lines from gpuarena Evaluation records, one per judged workload."""
    from gpuarena.interop.flashinfer_export import read_evaluations, traces_from_evaluation
    from gpuarena.interop.flashinfer_trace import trace_line
    from gpuarena.problems import resolve_problem
    from gpuarena.problems.loader import find_problem

    if statistic not in ("mean", "median"):
        fail(ValueError(f"--statistic must be mean or median, not {statistic!r}"))
    lines: list[str] = []
    try:
        for path in records:
            for record in read_evaluations(path):
                try:
                    loaded = (
                        resolve_problem(problem)
                        if problem
                        else find_problem(record.problem, Path.cwd(), [w.name for w in record.workloads])
                    )
                except GpuarenaError as exc:
                    raise GpuarenaError(f"{path}: {exc}") from None
                lines += [
                    trace_line(t)
                    for t in traces_from_evaluation(
                        record,
                        loaded,
                        solution_name=solution_name,
                        definition_name=definition,
                        statistic=cast(Literal["mean", "median"], statistic),  # checked above
                    )
                ]
    except GpuarenaError as exc:
        fail(exc)
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("a" if append else "w", encoding="utf-8") as handle:
        handle.write("".join(line + "\n" for line in lines))
    err.print(f"wrote {len(lines)} trace(s) to {output}", highlight=False)


@export_app.command("flashinfer")
def export_flashinfer(
    problem: Annotated[str, typer.Argument(help="A problem imported with `gpuarena import flashinfer`")],
    output: Annotated[
        Path,
        typer.Option(
            "-o", "--output", help="Data set folder: writes definitions/OP/NAME.json and workloads/OP/NAME.jsonl"
        ),
    ],
) -> None:
    """The FlashInfer-Trace definition and workloads of an imported problem, as its folder now says."""
    from gpuarena.interop.flashinfer_export import export_definition
    from gpuarena.interop.flashinfer_trace import to_json, write_jsonl
    from gpuarena.problems import resolve_problem

    try:
        definition, workloads = export_definition(resolve_problem(problem))
    except GpuarenaError as exc:
        fail(exc)
    definition_path = output / "definitions" / definition.op_type / f"{definition.name}.json"
    workloads_path = output / "workloads" / definition.op_type / f"{definition.name}.jsonl"
    definition_path.parent.mkdir(parents=True, exist_ok=True)
    definition_path.write_text(to_json(definition) + "\n", encoding="utf-8")
    write_jsonl(workloads, workloads_path)
    err.print(f"wrote {definition_path} and {workloads_path} ({len(workloads)} workloads)", highlight=False)


@export_app.command("solution")
def export_solution(
    solution: Annotated[Path, typer.Argument(help="A .py file, a solution folder or a pack")],
    problem: Annotated[
        str | None, typer.Option(help="The problem it solves (its convention decides destination_passing_style)")
    ] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Where to write (default: stdout)")] = None,
    name: Annotated[
        str | None, typer.Option(help="The solution's name [default: kept from an import, else the file's]")
    ] = None,
    author: Annotated[
        str | None, typer.Option(help="Its author [default: kept from an import, else anonymous]")
    ] = None,
    definition: Annotated[str | None, typer.Option(help="The definition's name [default: the problem's]")] = None,
    description: Annotated[str | None, typer.Option(help="A line on its technique")] = None,
) -> None:
    """A FlashInfer-Trace Solution (one JSON file, sources inline) from a gpuarena solution."""
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.interop.flashinfer_export import pack_solution
    from gpuarena.interop.flashinfer_trace import to_json
    from gpuarena.problems import resolve_problem

    try:
        packed = pack_solution(
            solution,
            problem=resolve_problem(problem) if problem else None,
            name=name,
            author=author,
            definition=definition,
            description=description,
        )
    except GpuarenaError as exc:
        fail(exc)
    text = to_json(packed) + "\n"
    if output:
        output.write_text(text, encoding="utf-8")
        err.print(f"wrote {output} (sources sha256 {packed.content_hash})", highlight=False)
    else:
        sys.stdout.write(text)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
    app.add_typer(export_app, name="export")
