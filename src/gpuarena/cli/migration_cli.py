"""`gpuarena app ...`: record a reference app's golden outputs, check a port against them
(docs/migration.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuarena.cli.console import err, fail, out
from gpuarena.errors import GpuarenaError

app_group = typer.Typer(
    no_args_is_help=True,
    help="Migration checks: record a reference app's golden outputs, "
    "check a port against them and score it (docs/migration.md).",
)
DeviceOpt = Annotated[
    str, typer.Option("--device", help="Passed to the app as $GPUARENA_APP_DEVICE (cpu, cuda, cuda:N)")
]
RepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--repeats", help="Run the app this many times instead of app.toml's repeats (quicker; fewer runs per figure)"
    ),
]


def _device(device: str) -> None:
    if device != "cpu" and not device.startswith("cuda"):
        raise GpuarenaError(f"--device {device!r}: use cpu, cuda or cuda:N")


@app_group.command("record")
def record_cmd(
    app_dir: Annotated[Path, typer.Argument(help="The reference app's folder (with app.toml)")],
    device: DeviceOpt = "cpu",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="The golden folder (new; default APP/../NAME.golden)")
    ] = None,
    repeats: RepeatsOpt = None,
) -> None:
    """Run the reference app and store its outputs and performance as a golden record."""
    from gpuarena.migration.golden import record
    from gpuarena.migration.model import load_app

    try:
        _device(device)
        golden_dir = output if output is not None else app_dir.resolve().parent / f"{load_app(app_dir).name}.golden"
        golden, run = record(app_dir, golden_dir, device, repeats)
    except GpuarenaError as exc:
        fail(exc)
        return
    out.print(f"recorded {golden.app}: {len(golden.outputs)} output(s) in {golden_dir}")
    if golden.performance is not None:
        p = golden.performance
        out.print(
            f"{p.name}: median {p.median:.4g}, 95% interval [{p.low:.4g}, {p.high:.4g}] over {len(p.samples)} runs"
        )
    if not run.sandboxed:
        err.print(f"warning: the app ran without the sandbox: {run.containment}", soft_wrap=True)


@app_group.command("check")
def check_cmd(
    app_dir: Annotated[Path, typer.Argument(help="The port's folder (with app.toml)")],
    golden: Annotated[Path, typer.Option("--golden", help="The golden folder made by `gpuarena app record`")],
    device: DeviceOpt = "cpu",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write report.json and report.html here")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    wall_time: Annotated[
        bool,
        typer.Option(
            "--wall-time",
            help="Compare the runs' wall times measured by gpuarena, not the app's own "
            "figure (what a ranked check on the service does)",
        ),
    ] = False,
    repeats: RepeatsOpt = None,
) -> None:
    """Run a port, compare its outputs with the golden ones and score it. Exits 0 when it ran,
    1 when it did not, 2 on a usage error."""
    from gpuarena.migration.check import check
    from gpuarena.migration.report import write_report

    try:
        _device(device)
        report = check(app_dir, golden, device, outside_timing=wall_time, repeats=repeats)
    except GpuarenaError as exc:
        fail(exc)
        return
    if output is not None:
        json_path, html_path = write_report(report, output)
        err.print(f"wrote {json_path} and {html_path}")
    if as_json:
        out.print_json(report.model_dump_json())
    else:
        if report.ran:
            out.print(f"{report.app}: ran")
            for o in report.outputs:
                status = "matched" if o.matched else f"differs (closeness {o.closeness:.4f})"
                out.print(f"  {o.file}: {status}: {o.summary}", soft_wrap=True)
        else:
            out.print(f"{report.app}: did not run: {report.reason}", soft_wrap=True)
        if not report.sandboxed:
            out.print(f"  not sandboxed: {report.containment}", soft_wrap=True)
        for note in report.score.notes:
            out.print(f"  {note}", soft_wrap=True)
        s = report.score
        out.print(f"score {s.total} = {s.running} ran + {s.matching} match + {s.speed} speed-up")
    raise typer.Exit(0 if report.ran else 1)


def register(app: typer.Typer) -> None:
    app.add_typer(app_group, name="app")
