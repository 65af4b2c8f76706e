"""Check a port against a golden record: run it, compare the golden outputs, measure the speed-up,
score it. The golden folder's app.toml (the reference's) decides which outputs are compared and
how, so a port cannot loosen its own tolerances; the port's app.toml says how to run it and read
its performance figure."""

from __future__ import annotations

import tempfile
from pathlib import Path

from gpuarena.harness.stats import bootstrap_median
from gpuarena.migration.compare import compare_output
from gpuarena.migration.golden import OUTPUTS_DIR, GoldenPerformance, environment, load_golden
from gpuarena.migration.model import Performance, load_app, with_repeats
from gpuarena.migration.report import MigrationReport, PortPerformance
from gpuarena.migration.runner import AppRun, run_app
from gpuarena.migration.score import measure_speedup, score


def _performance(
    run: AppRun, golden_perf: GoldenPerformance | None, port_perf: Performance | None
) -> PortPerformance | None:
    """The port's figures beside the golden ones; the speed-up only when both name the same figure."""
    if port_perf is None and golden_perf is None:
        return None
    if port_perf is None:
        assert golden_perf is not None  # both None returned above
        return PortPerformance(
            name=golden_perf.name,
            higher_is_better=golden_perf.higher_is_better,
            golden=golden_perf,
            samples=[],
            note="the port's app.toml has no performance section",
        )
    perf = PortPerformance(
        name=port_perf.name, higher_is_better=bool(port_perf.higher_is_better), golden=golden_perf, samples=run.figures
    )
    if run.figures:
        summary = bootstrap_median(run.figures)
        perf.median, perf.low, perf.high = summary.median, summary.low, summary.high
    elif run.ran:
        errors = [r.figure_error for r in run.runs if r.figure_error]
        perf.note = f"the figure could not be read: {errors[0] if errors else '?'}"
    if golden_perf is None:
        perf.note = perf.note or "the golden record has no performance figure"
    elif golden_perf.name != port_perf.name:
        perf.note = f"the port reports {port_perf.name}, the golden record {golden_perf.name}: not comparable"
    elif run.figures:
        try:
            perf.speedup = measure_speedup(golden_perf.samples, run.figures, golden_perf.higher_is_better)
        except ValueError as exc:
            perf.note = str(exc)
    return perf


WALL_FIGURE = "wall_s"
"""The figure a ranked check's speed-up compares: each run's wall seconds, measured outside the app."""


def _warm(walls: list[float]) -> list[float]:
    """The runs after the first: a session's first run reads the interpreter, the libraries and the
    GPU's kernels from a cold start (on an H100 the reference checked against its own golden record
    came out 1.4x "faster" with it kept: bench/results/app-jobs-cuda-NVIDIA-H100.md)."""
    return walls[1:] if len(walls) > 1 else walls


def with_setup(walls: list[float], setup: list[float]) -> list[float]:
    """Each run's wall time with its share of the setup's: setup is timed with the runs. It runs
    once before them, knowing their seed, and a port that did all its work there (the runs only
    copying the outputs) scored 150 of 150 points and 12-17x where its honest speed was 0.7-1.3x."""
    share = sum(setup) / len(walls) if walls else 0.0
    return [w + share for w in walls]


def _outside_performance(run: AppRun, golden_wall: list[float], golden_setup: list[float]) -> PortPerformance:
    """The runs' wall times beside the golden record's, both measured by gpuarena outside the app
    (the sandbox's start included on both sides; each side's setup spread over its runs:
    with_setup; each side's first run left out: _warm), so the app's own word counts for nothing."""
    golden_wall = _warm(with_setup(golden_wall, golden_setup))
    golden = None
    if golden_wall:
        g = bootstrap_median(golden_wall)
        golden = GoldenPerformance(
            name=WALL_FIGURE, higher_is_better=False, samples=golden_wall, median=g.median, low=g.low, high=g.high
        )
    samples = _warm(with_setup([r.wall_s for r in run.runs], [r.wall_s for r in run.setup])) if run.ran else []
    perf = PortPerformance(
        name=WALL_FIGURE,
        higher_is_better=False,
        golden=golden,
        samples=samples,
        note=(
            "measured outside the app (each run's wall time with its share of the setup's, but the first run); "
            "the app's own figure is not used"
        ),
    )
    if samples:
        s = bootstrap_median(samples)
        perf.median, perf.low, perf.high = s.median, s.low, s.high
    if golden is None:
        perf.note = "the golden record has no wall times (recorded before gpuarena kept them): no speed-up"
    elif samples:
        try:
            perf.speedup = measure_speedup(golden_wall, samples, False)
        except ValueError as exc:
            perf.note = str(exc)
    return perf


def check(
    app_dir: Path, golden_dir: Path, device: str = "cpu", outside_timing: bool = False, repeats: int | None = None
) -> MigrationReport:
    """Run the port in app_dir and build its migration report against golden_dir. With
    outside_timing (ranked checks on the service), the speed-up compares the runs' wall times
    measured by gpuarena, never a figure the app reports about itself. repeats: runs instead of
    app.toml's (a quicker check, its speed-up from fewer runs)."""
    app_dir, golden_dir = Path(app_dir).resolve(), Path(golden_dir).resolve()
    golden, reference = load_golden(golden_dir)
    # the outputs are compared with outputs made from the reference's seed: the port gets it too
    spec = with_repeats(load_app(app_dir), repeats).model_copy(update={"seed": reference.seed})
    with tempfile.TemporaryDirectory(prefix="gpuarena-check-") as root:
        run = run_app(app_dir, spec, Path(root), device, protected={"golden": golden_dir})
        produced = Path(run.output_dir)
        outputs = (
            [compare_output(o, produced / o.file, golden_dir / OUTPUTS_DIR / o.file) for o in reference.outputs]
            if run.ran
            else []
        )
    performance = (
        _outside_performance(run, golden.run_wall_s, golden.setup_wall_s)
        if outside_timing
        else _performance(run, golden.performance, spec.performance)
    )
    speedup = performance.speedup if performance is not None else None
    return MigrationReport(
        app=spec.name,
        golden_app=golden.app,
        device=device,
        golden_device=golden.device,
        golden_environment=golden.environment,
        environment={**environment(device), "app_containment": run.containment},
        ran=run.ran,
        reason=run.reason,
        sandboxed=run.sandboxed,
        containment=run.containment,
        runs=run.runs,
        outputs=outputs,
        performance=performance,
        score=score(run.ran, outputs, speedup),
    )
