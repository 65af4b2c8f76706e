"""`gpuarena suite run` and `gpuarena suite compare` (docs/suite.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from gpuarena.cli.console import err, fail, out
from gpuarena.cli.problem_filters import Level, Match, Model, Source, Tag
from gpuarena.errors import GpuarenaError

if TYPE_CHECKING:
    from gpuarena.suite.model import SuiteResult
    from gpuarena.suite.score import Comparison

SHIPPED_BASELINES = Path(__file__).resolve().parent / "baselines"
"""PyTorch eager on the lent GPU machine: every bundled problem on an H100 (H100-pytorch.json,
bench/results/suite-NVIDIA-H100.md), every problem of the dataset on an H200
(H200-pytorch-dataset.json)."""

suite_app = typer.Typer(
    no_args_is_help=True,
    help="The evaluation suite: a framework's implementation of each "
    "problem timed on a device, scored against a baseline (docs/suite.md).",
)


def _load(path: Path) -> SuiteResult:
    from gpuarena.suite.model import SuiteResult

    try:
        return SuiteResult.model_validate_json(path.read_text())
    except OSError as exc:
        raise GpuarenaError(f"{path}: {exc.strerror}") from None
    except ValueError as exc:
        raise GpuarenaError(f"{path}: not a suite result ({str(exc).splitlines()[0]})") from None


def _show(comparison: Comparison) -> None:
    table = Table("problem", "level", "weight", "x baseline", "95% interval", header_style="bold")
    for r in comparison.ratios:
        table.add_row(r.problem, str(r.level), f"{r.weight:g}", f"{r.ratio:.3f}", f"{r.low:.3f}-{r.high:.3f}")
    out.print(table)
    for name, why in comparison.left_out.items():
        out.print(f"left out: {name}: {why}", highlight=False)
    levels = ", ".join(f"level {k} {v:.3f}" for k, v in comparison.by_level.items())
    out.print(
        f"{comparison.result} against {comparison.baseline}: score {comparison.score:.3f} "
        f"(95% interval {comparison.low:.3f}-{comparison.high:.3f} from the timings, "
        f"{comparison.problems_low:.3f}-{comparison.problems_high:.3f} over resampled problem sets) "
        f"over {comparison.covered} problems; {levels}",
        highlight=False,
    )


def shipped_baseline(problems: set[str]) -> Path | None:
    """The shipped baseline that times the most of these problems (None: none times any)."""
    best, common = None, 0
    for path in sorted(SHIPPED_BASELINES.glob("*.json")):
        shared = len(problems & {p.problem for p in _load(path).problems})
        if shared > common:
            best, common = path, shared
    return best


@suite_app.command("run")
def run_cmd(
    device: Annotated[str, typer.Option("--device", help="cpu or cuda")] = "cpu",
    framework: Annotated[
        str,
        typer.Option(
            "--framework",
            help="pytorch (eager), torch-compile or jax (each on the problems whose reference is written in that framework)",
        ),
    ] = "pytorch",
    match: Match = None,
    level: Level = None,
    tag: Tag = None,
    model: Model = None,
    source: Source = None,
    root: Annotated[
        list[Path] | None,
        typer.Option("--root", help="Problems under this folder instead of the bundled ones (repeatable)"),
    ] = None,
    budget: Annotated[float, typer.Option(help="Timing budget per workload, seconds")] = 1.0,
    gpus: Annotated[
        int,
        typer.Option(
            "--gpus",
            help="Spread the problems over this many GPUs of this host, one process each (0: every visible GPU)",
        ),
    ] = 1,
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the result (JSON)")] = Path(
        "suite.json"
    ),
    baseline: Annotated[
        Path | None,
        typer.Option(
            "--baseline",
            help="Score the result against this suite result (on cuda, default: the shipped "
            "baseline that times the most of the problems this framework times)",
        ),
    ] = None,
) -> None:
    """Time a framework's implementation of each problem and write the suite result."""
    from gpuarena.problems.select import ProblemFilter, select
    from gpuarena.suite.frameworks import FRAMEWORKS, implements
    from gpuarena.suite.run import all_problems, run_suite
    from gpuarena.suite.score import compare

    try:
        if device != "cpu" and not device.startswith("cuda"):
            raise GpuarenaError(f"--device {device!r}: use cpu or cuda")
        chosen = select(all_problems(root or []), ProblemFilter.of(match, level, tag, model, source))
        if framework not in FRAMEWORKS:
            raise GpuarenaError(f"--framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
        if baseline is None and device != "cpu":
            # only the problems this framework times can be in common with a baseline
            baseline = shipped_baseline({p.id for p in chosen if implements(p, framework)})
            if baseline is None:
                err.print(
                    f"no shipped baseline times any of these problems with {framework}: the result is "
                    "not scored (--baseline names one)",
                    highlight=False,
                )
        base = _load(baseline) if baseline is not None else None

        def save(so_far: SuiteResult) -> None:
            output.write_text(so_far.model_dump_json(indent=2) + "\n")

        show = lambda text: err.print(text, highlight=False)  # noqa: E731
        if gpus != 1:
            from gpuarena.suite.shard import gpu_slots, run_sharded

            if device != "cuda":
                raise GpuarenaError(f"--gpus is for --device cuda (each process gets one GPU as cuda), not {device!r}")
            result = run_sharded(chosen, framework, device, budget, gpu_slots(gpus), progress=show, checkpoint=save)
        else:
            result = run_suite(chosen, framework, device, budget, progress=show, checkpoint=save)
        save(result)
        err.print(f"wrote {output}", highlight=False)
        if base is not None:
            _show(compare(base, result))
    except GpuarenaError as exc:
        fail(exc)


@suite_app.command("compare")
def compare_cmd(
    baseline: Annotated[Path, typer.Argument(help="The baseline's suite result")],
    result: Annotated[Path, typer.Argument(help="The suite result to score against it")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON")] = False,
    plots: Annotated[
        Path | None,
        typer.Option(
            "--plots", help="Also write its plots (SVG: by level, by model, the slowest problems) into this folder"
        ),
    ] = None,
) -> None:
    """Score a suite result against a baseline, problem by problem and in all."""
    from gpuarena.suite.plots import comparison_plots
    from gpuarena.suite.score import compare

    try:
        comparison = compare(_load(baseline), _load(result))
    except GpuarenaError as exc:
        fail(exc)
        return
    if as_json:
        out.print_json(comparison.model_dump_json())
    else:
        _show(comparison)
    if plots is not None:
        plots.mkdir(parents=True, exist_ok=True)
        for name, svg in comparison_plots(comparison).items():
            (plots / f"{name}.svg").write_text(svg)
        err.print(f"plots written to {plots}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(suite_app, name="suite")
