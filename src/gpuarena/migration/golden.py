"""Golden records: the reference stack's outputs and performance, kept so a port can be checked
later, elsewhere. A golden folder holds `outputs/` (the output files), `app.toml` (the reference
app's, whose outputs section decides how ports are compared) and `golden.json` (hashes, figures,
command, environment). Its files are written read-only, and every check verifies the hashes first.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import tempfile
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuarena.migration.model import APP_FILE, AppError, AppSpec, load_app, parse_app, with_repeats
from gpuarena.migration.runner import AppRun, file_sha256, run_app
from gpuarena.stack import versions

GOLDEN_FILE = "golden.json"
OUTPUTS_DIR = "outputs"
FORMAT = 1


class GoldenPerformance(BaseModel):
    """The reference's performance figure over its runs."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    name: str
    """latency_ms, tokens_per_s or samples_per_s."""
    higher_is_better: bool
    """Whether more is better."""
    samples: list[float]
    """The figure of each run."""
    median: float
    """Their median."""
    low: float
    """The median's 95% bootstrap interval, low end."""
    high: float
    """The median's 95% bootstrap interval, high end."""


class Golden(BaseModel):
    """golden.json."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    format: int = FORMAT
    """The format version of this file."""
    app: str
    """The reference app's name."""
    app_toml_sha256: str
    """SHA-256 of the reference app.toml (copied beside this file)."""
    command: list[str]
    """The command that produced the outputs, as app.toml gave it (an entry point as ['entry', 'file.py:function', ...])."""
    device: str
    """The --device it ran on."""
    outputs: dict[str, str]
    """output file -> SHA-256."""
    performance: GoldenPerformance | None = None
    """The performance figure, when the app reports one."""
    run_wall_s: list[float] = []
    """Each run's wall-clock seconds, measured by gpuarena outside the app: what a ranked check's
    speed-up compares (an app's own figure is its word; records made before this field: none)."""
    setup_wall_s: list[float] = []
    """Each setup command's wall-clock seconds, measured the same way: a ranked check times setup
    with the runs (records made before this field: none, taken as no setup)."""
    environment: dict[str, str]
    """python, torch, numpy versions (and those of gpuarena.stack.STACK_PACKAGES installed), the platform
    and the device's name (no hostname); and
    app_containment: whether the reference ran in the harness's sandbox (and how), or why not."""


def environment(device: str) -> dict[str, str]:
    """What produced the record, without anything naming the machine."""
    env = versions()
    env["device_name"] = platform.processor() or platform.machine() or "cpu"
    if device.startswith("cuda"):
        try:
            import torch

            env["device_name"] = torch.cuda.get_device_name(torch.device(device))
        except Exception as exc:  # a record without a GPU name is still a record
            env["device_name"] = f"unknown ({type(exc).__name__})"
    return env


def _shown(spec: AppSpec) -> list[str]:
    """The command as app.toml wrote it: an entry point as ['entry', 'app.py:main', *args]."""
    if spec.run.command is not None:
        return list(spec.run.command)
    return ["entry", str(spec.run.entry), *spec.run.args]


def _read_only(path: Path) -> None:
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)


def record(app_dir: Path, golden_dir: Path, device: str = "cpu", repeats: int | None = None) -> tuple[Golden, AppRun]:
    """Run the reference app and store its outputs and performance in golden_dir (which must
    not exist or be empty). Fails, storing nothing, when the app does not run or misses an output.
    repeats: runs instead of app.toml's (a quicker record, its figure from fewer runs)."""
    from gpuarena.harness.stats import bootstrap_median

    app_dir, golden_dir = Path(app_dir).resolve(), Path(golden_dir).resolve()
    spec = with_repeats(load_app(app_dir), repeats)
    if golden_dir.exists() and any(golden_dir.iterdir()):
        raise AppError(f"{golden_dir}: not empty; record into a new folder (golden files are read-only)")
    if golden_dir.is_relative_to(app_dir):
        raise AppError(f"{golden_dir}: inside the app folder; record elsewhere")
    with tempfile.TemporaryDirectory(prefix="gpuarena-record-") as root:
        run = run_app(app_dir, spec, Path(root), device)
        if not run.ran:
            raise AppError(f"{spec.name} did not run: {run.reason}")
        produced = Path(run.output_dir)
        missing = [o.file for o in spec.outputs if not (produced / o.file).is_file()]
        if missing:
            raise AppError(f"{spec.name} did not write {', '.join(missing)} into $GPUARENA_APP_OUTPUT")
        performance = None
        if spec.performance is not None:
            if not run.figures:
                errors = [r.figure_error for r in run.runs if r.figure_error]
                raise AppError(f"{spec.name}: the performance figure could not be read: {errors[0] if errors else '?'}")
            summary = bootstrap_median(run.figures)
            performance = GoldenPerformance(
                name=spec.performance.name,
                higher_is_better=bool(spec.performance.higher_is_better),
                samples=run.figures,
                median=summary.median,
                low=summary.low,
                high=summary.high,
            )
        golden_dir.mkdir(parents=True, exist_ok=True)
        hashes: dict[str, str] = {}
        for output in spec.outputs:
            target = golden_dir / OUTPUTS_DIR / output.file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(produced / output.file, target)
            hashes[output.file] = file_sha256(target)
            _read_only(target)
    toml_copy = golden_dir / APP_FILE
    shutil.copyfile(app_dir / APP_FILE, toml_copy)
    golden = Golden(
        app=spec.name,
        app_toml_sha256=file_sha256(toml_copy),
        command=_shown(spec),
        device=device,
        outputs=hashes,
        performance=performance,
        run_wall_s=[r.wall_s for r in run.runs],
        setup_wall_s=[r.wall_s for r in run.setup],
        environment={**environment(device), "app_containment": run.containment},
    )
    (golden_dir / GOLDEN_FILE).write_text(golden.model_dump_json(indent=2) + "\n", encoding="utf-8")
    for path in (toml_copy, golden_dir / GOLDEN_FILE):
        _read_only(path)
    return golden, run


def load_golden(golden_dir: Path) -> tuple[Golden, AppSpec]:
    """Read a golden folder and verify every hash; returns the record and the reference app.toml."""
    import tomllib

    golden_dir = Path(golden_dir)
    path = golden_dir / GOLDEN_FILE
    if not path.is_file():
        raise AppError(f"{golden_dir}: no {GOLDEN_FILE}; make one with `gpuarena app record`")
    try:
        golden = Golden.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise AppError(f"{path}: not a golden record: {exc}") from None
    toml_path = golden_dir / APP_FILE
    if not toml_path.is_file() or file_sha256(toml_path) != golden.app_toml_sha256:
        raise AppError(f"{toml_path}: missing or changed since it was recorded (its SHA-256 differs)")
    spec = parse_app(tomllib.loads(toml_path.read_text(encoding="utf-8")), str(toml_path))
    for name, digest in golden.outputs.items():
        file = golden_dir / OUTPUTS_DIR / name
        if not file.is_file() or file_sha256(file) != digest:
            raise AppError(f"{file}: missing or changed since it was recorded (its SHA-256 differs)")
    return golden, spec


def make_writable(golden_dir: Path) -> None:
    """Undo the read-only bits so a golden folder can be deleted (tests, re-recording)."""
    for root, _dirs, files in os.walk(golden_dir):
        for name in files:
            os.chmod(os.path.join(root, name), stat.S_IRUSR | stat.S_IWUSR)
