"""`gpuarena harvest MODEL`: run a model for one phase, record its operator calls, and write the
worthwhile ones as problems with provenance and weights (docs/dataset.md). Small on purpose:
torch and the harvester are imported inside the command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from gpuarena.cli.console import err, fail, out
from gpuarena.errors import GpuarenaError


def harvest_cmd(
    model: Annotated[
        str,
        typer.Argument(
            help="tiny-llama, small-llama, llama:dim=..,layers=..,heads=..,vocab=..,ffn=.., "
            "hf:<ModelClass>[:size=full][,key=value...], or a JAX model: "
            "jax:tiny-llama, jax:keras:<Backbone>[,key=value...]"
        ),
    ],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="Folder for the problems, harvest.json and profile.jsonl")
    ],
    phase: Annotated[
        str, typer.Option(help="prefill (batch x seq tokens) or decode (one token against a KV cache of --context)")
    ] = "prefill",
    batch: Annotated[int, typer.Option(min=1, help="Sequences")] = 1,
    seq: Annotated[int, typer.Option(min=1, help="Prefill: tokens per sequence")] = 128,
    context: Annotated[int, typer.Option(min=1, help="Decode: tokens already in the KV cache")] = 128,
    device: Annotated[
        str, typer.Option(help="cpu or cuda[:N]: where the model runs and candidates are checked")
    ] = "cpu",
    min_share: Annotated[
        float, typer.Option(min=0, max=1, help="Write only groups with at least this share of the measured time")
    ] = 0.01,
    seed: Annotated[int, typer.Option(help="Seed of the weights and inputs")] = 0,
    repeats: Annotated[int, typer.Option(min=1, help="Forwards recorded (after one warm-up)")] = 3,
    dtype: Annotated[str, typer.Option(help="The model's dtype: float32, bfloat16 or float16")] = "float32",
    against: Annotated[
        list[Path] | None,
        typer.Option("--against", help="Problem roots a candidate must not repeat (default: the bundled problems)"),
    ] = None,
    dedupe: Annotated[bool, typer.Option(help="Leave out candidates that repeat a problem of --against")] = True,
    modules: Annotated[
        bool, typer.Option(help="Also write each submodule's calls as a fusion problem (levels 2-4)")
    ] = True,
) -> None:
    """Harvest problems from a model: every operator call of one phase, grouped by op and shape, and
    every submodule call as a fusion, weighted by its share of the time, checked; writes
    OUTPUT/level1-4/*, harvest.json, profile.jsonl and modules.jsonl."""
    import torch

    from gpuarena.bundled import bundled_root
    from gpuarena.dataset.harvest import harvest
    from gpuarena.dataset.models import build
    from gpuarena.dataset.record import KernelTimer, cpu_timer

    sizes = f"--seq {seq}" if phase == "prefill" else f"--context {context}"
    roots = (against or [bundled_root()]) if dedupe else []
    compared = " --no-dedupe" if not dedupe else "".join(f" --against {root}" for root in against or [])
    command = (
        f"gpuarena harvest {model} --phase {phase} --batch {batch} {sizes} --device {device} "
        f"--min-share {min_share:g} --seed {seed} --repeats {repeats} --dtype {dtype}{compared}"
        f"{'' if modules else ' --no-modules'} -o {output}"
    )
    try:
        if device != "cpu" and not device.startswith("cuda"):
            raise GpuarenaError(f"--device {device!r}: use cpu, cuda or cuda:N")
        if dtype not in ("float32", "bfloat16", "float16"):
            raise GpuarenaError(f"--dtype {dtype!r}: use float32, bfloat16 or float16")
        if model.startswith("jax:"):
            result = _harvest_jax(
                model, output, phase, batch, seq, device, min_share, seed, repeats, dtype, modules, command
            )
            _report(result, output)
            return
        workload = build(model, phase, batch, seq, context, device=device, seed=seed, dtype=getattr(torch, dtype))
        with err.status("recording") as status:
            result = harvest(
                workload.forward,
                output,
                model=model,
                phase=phase,
                sizes=workload.sizes,
                command=command,
                device=device,
                seed=seed,
                min_share=min_share,
                repeats=repeats,
                timer=cpu_timer if device == "cpu" else KernelTimer(),
                progress=lambda text: status.update(text),
                against=roots,
                net=workload.net if modules else None,
            )
    except GpuarenaError as exc:
        fail(exc)
        return
    _report(result, output)


def _harvest_jax(
    model: str,
    output: Path,
    phase: str,
    batch: int,
    seq: int,
    device: str,
    min_share: float,
    seed: int,
    repeats: int,
    dtype: str,
    modules: bool,
    command: str,
) -> Any:
    """A JAX model's harvest (dataset/jax_harvest.py), its weights and primitives on the device's
    JAX device (a GPU's at real sizes), each primitive run and timed alone."""
    import jax

    from gpuarena.dataset.jax_harvest import harvest_jax, jax_device
    from gpuarena.dataset.jax_models import build_jax, halved_jax

    with jax.default_device(jax_device(device)):  # the model's weights too, not JAX's default
        workload = build_jax(model, phase, batch, seq, seed=seed, dtype=dtype)
        halved = halved_jax(model, phase, batch, seq, seed=seed, dtype=dtype) if modules else None
        with err.status("recording") as status:
            return harvest_jax(
                workload.forward,
                workload.arguments,
                output,
                model=model,
                phase=phase,
                sizes=workload.sizes,
                command=command,
                seed=seed,
                min_share=min_share,
                repeats=repeats,
                progress=lambda text: status.update(text),
                fusions=modules,
                device=device,
                halved=(halved.forward, halved.arguments) if halved else None,
            )


def _report(result: Any, output: Path) -> None:
    """What a harvest wrote, rejected and left out, by status."""
    counts: dict[str, int] = {}
    for group in result.groups:
        counts[group.status] = counts.get(group.status, 0) + 1
    out.print(
        f"{result.calls} calls a forward in {len(result.groups)} groups: "
        + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
        highlight=False,
    )
    written_share = sum(g.share for g in result.groups if g.status == "written" and g.kind == "op")
    out.print(
        f"wrote {result.written} problems to {output}/level1-4 (the ops: {written_share:.1%} of the time); "
        f"check rejected {result.rejected} (ops: {result.rejected_share:.1%} of the time); {result.duplicates} "
        f"repeat a problem of the dataset: see {output}/harvest.json",
        highlight=False,
    )


sample_app = typer.Typer(
    help="Community samples (the CCF dataset track): check one, submit it to a service, review.", no_args_is_help=True
)


@sample_app.command("check")
def sample_check_cmd(
    folder: Annotated[
        Path,
        typer.Argument(
            help="The sample's folder (sample.toml, problem/, prompt.md, first and optimised kernels, report.md)"
        ),
    ],
    device: Annotated[str, typer.Option(help="Where the problem is checked and both kernels run")] = "cpu",
    problems: Annotated[
        list[Path] | None,
        typer.Option("--problems", help="Problem roots the sample must not repeat (default: the bundled problems)"),
    ] = None,
    budget: Annotated[float, typer.Option(min=0.05, help="Timing budget per workload, seconds")] = 0.5,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here as JSON")] = None,
) -> None:
    """Check a sample: its problem passes `gpuarena check`, both kernels pass the harness, their
    speed-ups are measured, and the dataset does not already hold its problem. Exit 1 unless ok."""
    from gpuarena.dataset.sample import check_sample

    if not folder.is_dir():
        fail(GpuarenaError(f"{folder}: not a folder (a sample is a folder with sample.toml)"))
        return
    report = check_sample(folder, device=device, dataset=problems, budget_s=budget)
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=2) + "\n")
    colour = {"ok": "green", "duplicate": "yellow", "broken": "bold red"}[report.verdict]
    out.print(
        f"[{colour}]{report.verdict}[/]  {escape(str(folder))}"
        + (f"  (problem {escape(report.problem)}: {escape(report.problem_check)})" if report.problem else ""),
        markup=True,
        highlight=False,
    )
    for part in ("first", "optimised"):
        result = getattr(report, part)
        if result is not None:
            speed = f", speed-up {result.score:.2f}x over the reference" if result.score else ""
            out.print(f"  {part}: {result.status}{speed}", highlight=False, markup=False)
    if report.optimised_over_first:
        out.print(f"  optimised over first: {report.optimised_over_first:.2f}x", highlight=False, markup=False)
    if report.score_basis:
        score = f"{report.score:.2f}x" if report.score else "none"
        out.print(f"  score: {score}, over {report.score_basis}", highlight=False, markup=False)
    if report.reference_slowdown and report.reference_slowdown > 1.5:
        slow = f"  the sample's reference ran {report.reference_slowdown:.1f}x slower than the canonical one"
        out.print(slow, highlight=False, markup=False)
    for note in report.notes:
        out.print(f"  note: {note}", highlight=False, markup=False)
    for dup in report.duplicates:
        pairs = ", ".join(f"{ours} = {theirs}" for ours, theirs in dup.workloads.items())
        what = "repeats" if dup.whole else "overlaps"
        out.print(f"  {what} {dup.problem}: {pairs}", highlight=False, markup=False)
    for error in report.errors:
        out.print(f"  - {error}", highlight=False, markup=False)
    raise typer.Exit(0 if report.ok else 1)


dataset_app = typer.Typer(help="The evaluation dataset: problems assembled from harvests.", no_args_is_help=True)


@dataset_app.command("add")
def dataset_add_cmd(
    harvests: Annotated[list[Path], typer.Argument(help="Folders written by gpuarena harvest -o")],
    output: Annotated[
        Path, typer.Option("-o", "--output", help="The dataset's folder (new, or one this command made)")
    ],
    check: Annotated[bool, typer.Option(help="Check every problem on the CPU; leave out those that fail")] = True,
    retry: Annotated[
        bool,
        typer.Option(
            "--retry-left-out",
            help="Assemble again, from the harvests given, the "
            "problems the CPU's check left out, and check only those and new ones",
        ),
    ] = False,
    retry_on: Annotated[
        list[str] | None,
        typer.Option(
            "--retry-left-out-on",
            help="Also those a recheck on this device left out (repeatable); recheck them there next",
        ),
    ] = None,
) -> None:
    """Add harvested problems to a dataset: each gets a small CPU workload, the same op on the same
    arguments from several harvests becomes one problem with each one's workload, weights add up;
    writes OUTPUT/level1/* and OUTPUT/dataset.json (docs/dataset.md)."""
    from gpuarena.dataset.assemble import add

    try:
        with err.status("assembling") as status:
            result = add(
                harvests,
                output,
                check=check,
                progress=lambda text: status.update(text),
                retry=retry,
                retry_on=retry_on or (),
            )
    except GpuarenaError as exc:
        fail(exc)
        return
    out.print(
        f"{result.kept} problems in {output} from {len(result.harvests)} harvests; {result.left_out} left out "
        f"({result.left_out_share:.0%} of the candidates) by gpuarena check on the CPU: see {output}/dataset.json",
        highlight=False,
    )
    for device in retry_on or ():
        out.print(
            f"run gpuarena dataset recheck {output} --device {device} before using it: what {device} left out "
            "passed the CPU's check here",
            highlight=False,
        )


@dataset_app.command("recheck")
def dataset_recheck_cmd(
    root: Annotated[Path, typer.Argument(help="The dataset's folder (made by gpuarena dataset add)")],
    device: Annotated[str, typer.Option(help="Where to check: cuda, cuda:N or cpu")] = "cuda",
) -> None:
    """Check every problem of a dataset on a device (all its workloads for that device) and leave
    out those that fail, with their reasons in dataset.json (docs/dataset.md)."""
    from gpuarena.dataset.assemble import recheck

    try:
        with err.status("checking") as status:
            result, newly = recheck(root, device, progress=lambda text: status.update(text))
    except GpuarenaError as exc:
        fail(exc)
        return
    for entry in newly:
        out.print(f"left out {entry.problem}: {'; '.join(entry.reasons)}", highlight=False)
    out.print(
        f"{result.kept} problems kept in {root}; {len(newly)} left out on {device} now, {result.left_out} in all "
        f"({result.left_out_share:.0%} of the candidates)",
        highlight=False,
    )


@dataset_app.command("leave-out")
def dataset_leave_out_cmd(
    root: Annotated[Path, typer.Argument(help="The dataset's folder (made by gpuarena dataset add)")],
    failed_in: Annotated[
        Path | None,
        typer.Option(
            "--failed-in", help="A suite result (gpuarena suite run -o) of an honest framework, torch-compile say"
        ),
    ] = None,
    problem: Annotated[
        list[str] | None, typer.Option("--problem", help="A kept problem's id to leave out (repeatable)")
    ] = None,
    reason: Annotated[
        str, typer.Option("--reason", help="Why the --problem ones are left out (dataset.json keeps it)")
    ] = "",
) -> None:
    """Leave out the problems whose implementation gave wrong values in a suite run (a tolerance
    an honest implementation fails is unfair), or problems named with the reason (docs/dataset.md)."""
    from pydantic import ValidationError

    from gpuarena.dataset.assemble import leave_out_failed, leave_out_named
    from gpuarena.suite.model import SuiteResult

    problem = problem or []
    if (failed_in is None) == (not problem) or (problem and not reason.strip()):
        fail(GpuarenaError("give --failed-in RESULT, or --problem ID... with --reason TEXT"))
        return
    result = None
    try:
        result = SuiteResult.model_validate_json(failed_in.read_text()) if failed_in is not None else None
    except (OSError, ValidationError) as exc:
        fail(GpuarenaError(f"{failed_in}: not a suite result ({str(exc).splitlines()[0]})"))
        return
    try:
        if result is None:
            dataset, newly = leave_out_named(root, problem, reason.strip())
        else:
            dataset, newly = leave_out_failed(root, result)
    except GpuarenaError as exc:
        fail(exc)
        return
    for entry in newly:
        out.print(f"left out {entry.problem}: {entry.reasons[0]}", highlight=False)
    out.print(
        f"{dataset.kept} problems kept in {root}; {len(newly)} left out now, {dataset.left_out} in all", highlight=False
    )


@dataset_app.command("weigh")
def dataset_weigh_cmd(
    root: Annotated[Path, typer.Argument(help="The dataset's folder (level1-4/*/problem.toml, dataset.json)")],
    harvest_folders: Annotated[
        list[Path] | None, typer.Argument(help="More harvest folders: `--harvests dataset/harvests/*` lists them all")
    ] = None,
    harvests: Annotated[
        list[Path] | None,
        typer.Option("--harvests", help="Folders written by gpuarena harvest -o; the words after it are more"),
    ] = None,
    timings: Annotated[
        list[Path] | None,
        typer.Option(
            "--timings", help="A suite result (gpuarena suite run -o) of eager PyTorch on a GPU, or JAX's (repeatable)"
        ),
    ] = None,
    write: Annotated[
        bool, typer.Option("--write", help="Write the weights into problem.toml and dataset.json")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the report here as JSON")] = None,
) -> None:
    """Weigh a dataset's problems by the model time they stand for, each op call counted once:
    weight (each model-phase's calls claimed by the outermost kept problem; each model-phase
    weighs alike), level_weight (the same within a level), model_weights and workload weights;
    reports each model-phase's coverage and the suite times that disagree with the harvest's
    by more than 2x (docs/dataset.md)."""
    from pydantic import ValidationError

    from gpuarena.dataset.weights import weigh
    from gpuarena.dataset.weights import write as write_weights
    from gpuarena.suite.model import SuiteResult

    results = []
    for path in timings or []:
        try:
            results.append(SuiteResult.model_validate_json(path.read_text()))
        except (OSError, ValidationError) as exc:
            fail(GpuarenaError(f"{path}: not a suite result ({str(exc).splitlines()[0]})"))
    try:
        folders = [*(harvests or []), *(harvest_folders or [])]
        if not folders:
            raise GpuarenaError("no harvests: give --harvests dataset/harvests/* (folders written by gpuarena harvest)")
        with err.status("weighing"):
            report = weigh(root, folders, results)
        if write:
            write_weights(root, report)
    except GpuarenaError as exc:
        fail(exc)
        return
    if json_out is not None:
        json_out.write_text(report.model_dump_json(indent=2) + "\n")
    _show_weights(report)


def _show_weights(report: Any) -> None:
    """What `dataset weigh` found: each model-phase's sum and coverage, the heaviest problems, the
    disagreements and the problems nothing claims."""
    from rich.table import Table

    models = Table("model-phase", "sum", "covered", "problems", "harvest-timed", "notes", header_style="bold")
    for m in report.models:
        covered = f"{m.covered:.1%}" if m.covered is not None else "-"
        models.add_row(
            m.label, f"{m.weight_sum:.6f}", covered, str(m.problems), str(m.harvest_timed), str(len(m.notes))
        )
    out.print(models)
    where = {p.problem: max(((c, m.label) for m in report.models for c in m.claims if c.problem == p.problem),
                            key=lambda x: x[0].weight, default=None) for p in report.problems[:15]}  # fmt: skip
    top = Table(
        "problem", "weight", "level weight", "model-phase", "µs/call", "calls/forward", "from", header_style="bold",
        title="the 15 largest weights",
    )  # fmt: skip
    for p in report.problems[:15]:
        found = where[p.problem]
        claim, label = found if found else (None, "-")
        top.add_row(
            p.problem,
            f"{p.weight:.4f}",
            f"{p.level_weight:.4f}",
            label,
            f"{claim.us_per_call:.1f}" if claim else "-",
            f"{claim.calls:g}" if claim else "-",
            claim.source if claim else "-",
        )
    out.print(top)
    if report.disagreements:
        table = Table(
            "model-phase", "group", "problem", "calls/forward", "recorded µs", "timed µs", "timed/recorded",
            header_style="bold", title=f"{len(report.disagreements)} suite times more than 2x off the harvest's",
        )  # fmt: skip
        for d in report.disagreements:
            table.add_row(
                d.label,
                d.group,
                d.problem,
                f"{d.calls:g}",
                f"{d.recorded_us:.1f}",
                f"{d.timed_us:.1f}",
                f"{d.ratio:.2f}",
            )
        out.print(table)
    for problem in report.unclaimed:
        out.print(f"unclaimed (weight 0): {problem}", highlight=False)
    levels = ", ".join(f"level {k} {v:.6f}" for k, v in report.level_sums.items())
    out.print(
        f"{len(report.problems)} problems, {len(report.models)} model-phases and configs: weights sum to "
        f"{report.weight_sum:.6f}; level weights: {levels}; {len(report.disagreements)} disagreements, "
        f"{len(report.unclaimed)} unclaimed; "
        + (f"written into {report.root}" if report.written else "nothing written (--write writes)"),
        highlight=False,
    )


def _service_commands() -> None:
    """The commands that go through a service (cli/sample_cli.py)."""
    from gpuarena.cli import sample_cli

    sample_app.command("submit")(sample_cli.submit_cmd)
    sample_app.command("list")(sample_cli.list_cmd)
    sample_app.command("show")(sample_cli.show_cmd)
    sample_app.command("review")(sample_cli.review_cmd)
    dataset_app.command("pull")(sample_cli.pull_cmd)


def _distinct_commands() -> None:
    """One problem per computation (cli/distinct_cli.py, issue 48)."""
    from gpuarena.cli import distinct_cli

    dataset_app.command("distinct")(distinct_cli.distinct_cmd)
    dataset_app.command("merge")(distinct_cli.merge_cmd)


_service_commands()
_distinct_commands()


def register(app: typer.Typer) -> None:
    app.command("harvest")(harvest_cmd)
    app.add_typer(sample_app, name="sample")
    app.add_typer(dataset_app, name="dataset")
