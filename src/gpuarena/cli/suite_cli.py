"""`gpuarena suite run` and `gpuarena suite compare` (docs/suite.md)."""

from __future__ import annotations

from collections.abc import Callable
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

SHIPPED_BASELINES = Path(__file__).resolve().parents[1] / "suite" / "baselines"
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
    if comparison.left_out:
        left = Table("left out", "why", header_style="bold", title=f"{len(comparison.left_out)} problems not scored")
        for name, why in comparison.left_out.items():
            left.add_row(name, why)
        out.print(left)
        kinds = ", ".join(f"{n} {kind}" for kind, n in comparison.left_out_counts.items())
        out.print(f"left out: {kinds}", highlight=False)
    levels = ", ".join(f"level {k} {v:.3f}" for k, v in comparison.by_level.items())
    runs = (
        f", {comparison.runs_low:.3f}-{comparison.runs_high:.3f} over the runs' scores"
        if comparison.runs_low is not None and comparison.runs_high is not None
        else ""
    )
    out.print(
        f"{comparison.result} against {comparison.baseline}: score {comparison.score:.3f} "
        f"(95% interval {comparison.low:.3f}-{comparison.high:.3f} from the timings{runs}, "
        f"{comparison.problems_low:.3f}-{comparison.problems_high:.3f} over resampled problem sets"
        f"{' and runs' if runs else ''}) over {comparison.covered} problems; {levels}",
        highlight=False,
    )
    out.print(f"the interval: {comparison.spread}", highlight=False)


def shipped_baseline(problems: set[str], device_name: str | None = None) -> Path | None:
    """The shipped baseline that times the most of these problems, among those timed on
    device_name when given (None: none times any)."""
    best, common = None, 0
    for path in sorted(SHIPPED_BASELINES.glob("*.json")):
        shipped = _load(path)
        if device_name is not None and shipped.device_name != device_name:
            continue
        shared = len(problems & {p.problem for p in shipped.problems})
        if shared > common:
            best, common = path, shared
    return best


def _shipped() -> str:
    return (
        ", ".join(f"{path.name} ({_load(path).device_name})" for path in sorted(SHIPPED_BASELINES.glob("*.json")))
        or "none"
    )


AcrossDevices = Annotated[
    bool,
    typer.Option(
        "--across-devices",
        help="Score results timed on different devices (a CPU against a GPU, one GPU model against another): "
        "refused without it",
    ),
]
AcrossWorkloads = Annotated[
    bool,
    typer.Option(
        "--across-workloads",
        help="Score problems that the two results timed on different workloads: refused without it",
    ),
]


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
            "baseline timed on this device that times the most of the problems this framework times)",
        ),
    ] = None,
    runs: Annotated[
        int,
        typer.Option(
            "--runs",
            help="Run the whole suite this many times, one after another: each problem keeps every run's "
            "time and its interval spans them all (the run-to-run spread, docs/suite.md)",
        ),
    ] = 1,
    across_devices: AcrossDevices = False,
    across_workloads: AcrossWorkloads = False,
    skip_in: Annotated[
        list[Path] | None,
        typer.Option(
            "--skip-in",
            help="Leave out the problems this earlier result already has (repeatable): a suite cut into "
            "device calls, the parts joined after with `suite join`",
        ),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            help="Seconds one problem's run may take at most (its own benchmark limit where lower): past it "
            "the problem is a TIMEOUT and the suite goes on",
        ),
    ] = None,
) -> None:
    """Time a framework's implementation of each problem and write the suite result."""
    from gpuarena.problems.select import ProblemFilter, select
    from gpuarena.suite.frameworks import FRAMEWORKS, implements
    from gpuarena.suite.run import all_problems, run_suite
    from gpuarena.suite.runs import merge_runs
    from gpuarena.suite.score import compare

    try:
        if device != "cpu" and not device.startswith("cuda"):
            raise GpuarenaError(f"--device {device!r}: use cpu or cuda")
        if runs < 1:
            raise GpuarenaError(f"--runs {runs}: give 1 or more")
        if time_limit is not None and time_limit <= 0:
            raise GpuarenaError(f"--time-limit {time_limit:g}: give a number of seconds over 0")
        chosen = select(all_problems(root or []), ProblemFilter.of(match, level, tag, model, source))
        had = {p.problem for path in skip_in or [] for p in _load(path).problems}
        chosen = [p for p in chosen if p.id not in had]
        if framework not in FRAMEWORKS:
            raise GpuarenaError(f"--framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
        if gpus != 1 and device != "cuda":
            raise GpuarenaError(f"--gpus is for --device cuda (each process gets one GPU as cuda), not {device!r}")
        # only the problems this framework times can be in common with a baseline
        own = {p.id for p in chosen if implements(p, framework)}
        if baseline is None and device != "cpu" and shipped_baseline(own) is None:
            err.print(
                f"no shipped baseline times any of these problems with {framework}: the result is "
                "not scored (--baseline names one)",
                highlight=False,
            )
        base = _load(baseline) if baseline is not None else None
        done: list[SuiteResult] = []

        def save(so_far: SuiteResult) -> None:
            output.write_text(merge_runs([*done, so_far]).model_dump_json(indent=2) + "\n")

        for k in range(1, runs + 1):
            prefix = f"[run {k}/{runs}] " if runs > 1 else ""
            show = lambda text, prefix=prefix: err.print(prefix + text, highlight=False)  # noqa: E731
            if gpus != 1:
                from gpuarena.suite.shard import gpu_slots, run_sharded

                one = run_sharded(
                    chosen,
                    framework,
                    device,
                    budget,
                    gpu_slots(gpus),
                    progress=show,
                    checkpoint=save,
                    time_limit_s=time_limit,
                )
            else:
                one = run_suite(
                    chosen, framework, device, budget, progress=show, checkpoint=save, time_limit_s=time_limit
                )
            done.append(one)
        result = merge_runs(done)
        output.write_text(result.model_dump_json(indent=2) + "\n")
        err.print(f"wrote {output}", highlight=False)
        if base is None and device != "cpu":
            base = _pick_shipped(result, across_devices, output)
        if base is not None:
            _show(compare(base, result, across_devices, across_workloads))
    except GpuarenaError as exc:
        fail(exc)


def _pick_shipped(result: SuiteResult, across_devices: bool, output: Path) -> SuiteResult | None:
    """The shipped baseline a run is scored against by default, said aloud: which, on what device,
    and what it leaves out (None, and why, when no shipped baseline on this device times any)."""
    timed = {p.problem for p in result.problems if p.time_us is not None}
    picked = shipped_baseline(timed, None if across_devices else result.device_name)
    if picked is None:
        err.print(
            f"no shipped baseline timed on {result.device_name} times these problems (shipped: {_shipped()}): "
            f"the result is not scored; `gpuarena suite compare BASELINE {output} --across-devices` scores it "
            "against one of them",
            highlight=False,
        )
        return None
    base = _load(picked)
    held = len(timed & {p.problem for p in base.problems})
    err.print(
        f"scored against the shipped baseline {picked.name} ({base.framework} on {base.device_name}, "
        f"{base.runs} run(s)): it holds {held} of the {len(timed)} problems this run timed; the others are "
        "listed as left out, with the reason",
        highlight=False,
    )
    return base


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
    across_devices: AcrossDevices = False,
    across_workloads: AcrossWorkloads = False,
) -> None:
    """Score a suite result against a baseline, problem by problem and in all. Refused across
    devices or workload sets unless asked; every problem not scored is listed with the reason."""
    from gpuarena.suite.plots import comparison_plots
    from gpuarena.suite.score import compare

    try:
        comparison = compare(_load(baseline), _load(result), across_devices, across_workloads)
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


def _write_combined(
    combine: Callable[[list[SuiteResult]], SuiteResult], paths: list[Path], output: Path
) -> SuiteResult | None:
    """The results at `paths` made one by `combine`, written to `output`; None where they are
    refused (said, exit 2)."""
    try:
        combined = combine([_load(path) for path in paths])
    except GpuarenaError as exc:
        fail(exc)
        return None
    output.write_text(combined.model_dump_json(indent=2) + "\n")
    return combined


@suite_app.command("merge")
def merge_cmd(
    runs: Annotated[
        list[Path], typer.Argument(help="Suite results of one framework on one device, each one run or more")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the merged result (JSON)")],
) -> None:
    """Merge runs of the suite made apart (in separate device calls, say) into one result of
    several runs, as `suite run --runs N` writes it."""
    from gpuarena.suite.runs import merge_runs

    merged = _write_combined(merge_runs, runs, output)
    if merged is None:
        return
    timed = sum(p.time_us is not None for p in merged.problems)
    err.print(
        f"wrote {output}: {merged.runs} runs, {timed} of {len(merged.problems)} problems timed in every run",
        highlight=False,
    )


@suite_app.command("restamp")
def restamp_cmd(
    result: Annotated[Path, typer.Argument(help="A suite result (gpuarena suite run -o)")],
    root: Annotated[list[Path], typer.Option("--root", help="The problems as they are now (repeatable)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the restamped result (JSON)")],
) -> None:
    """Read a suite result with the problems' weights and workloads as they are now (after
    `gpuarena dataset weigh --write`, say): each time from its kept workload medians, nothing
    timed again (docs/suite.md)."""
    from gpuarena.suite.restamp import restamped
    from gpuarena.suite.run import all_problems

    stamped = restamped(_load(result), {p.id: p for p in all_problems(root)})
    output.write_text(stamped.model_dump_json(indent=2) + "\n")
    err.print(
        f"wrote {output}: {len(stamped.problems)} problems, {len(stamped.left_out)} left out (its left_out says why)",
        highlight=False,
    )


@suite_app.command("join")
def join_cmd(
    parts: Annotated[list[Path], typer.Argument(help="Results of one suite run made in parts (`suite run --skip-in`)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the joined result (JSON)")],
    retimed: Annotated[
        bool,
        typer.Option(
            "--retimed",
            help="A later part times again problems an earlier part had (after a harness fix, say): "
            "its times replace the earlier ones",
        ),
    ] = False,
) -> None:
    """Join the parts of one suite run made in separate device calls, each timing other
    problems, into one result (`suite merge` is for runs of the same problems)."""
    from gpuarena.suite.runs import join_parts

    joined = _write_combined(lambda results: join_parts(results, retimed), parts, output)
    if joined is None:
        return
    err.print(f"wrote {output}: {len(joined.problems)} problems from {len(parts)} parts", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(suite_app, name="suite")
