"""Run an app: in a fresh working folder (a copy of the app folder), under the time limit,
`repeats` times, reading the performance figure of each run.

Each run (and each setup command) runs in the harness's bubblewrap sandbox, as kernels do
(migration/sandboxed.py says how, and what the sandbox shows).

Second lines, kept: the source and golden folders are hashed before and after and any change
fails the run with the files named; an output folder holding a symbolic link or anything but
plain files and folders fails the run before the supervisor reads it.

Where the sandbox cannot run (bubblewrap missing or unusable, or GPUARENA_SANDBOX=0), the app
runs as before: a plain subprocess of the supervisor's user in its own process group (killed as
a group at the time limit; a child that leaves the group escapes), with the supervisor's whole
environment; the result says so (`AppRun.sandboxed`, `AppRun.containment`, and the report).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from gpuarena.harness.launch import containment
from gpuarena.migration.model import AppSpec, Performance
from gpuarena.migration.sandboxed import STDOUT_SCAN_BYTES, TAIL_BYTES, THREAD_CAPS, RunResult, Sandbox, run_sandboxed

OUTPUT_DIR = "_gpuarena_output"
"""The output folder's name, inside the run's folder and beside the working folder."""
_ENTRY_SHIM = """\
import importlib, importlib.util, sys
target, function, args = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, ".")
if target.endswith(".py"):
    spec = importlib.util.spec_from_file_location("__gpuarena_app__", target)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
else:
    module = importlib.import_module(target)
sys.argv = [target, *args]
result = getattr(module, function)(*args)
sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)
"""


class AppRun(BaseModel):
    """All runs of an app, and whether it ran."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    ran: bool
    """Whether setup and every run exited 0 within the time limit without touching protected files."""
    reason: str = ""
    """Why it did not run, when it did not."""
    setup: list[RunResult] = []
    """The setup commands' results."""
    runs: list[RunResult] = []
    """The runs' results, in order."""
    figures: list[float] = []
    """The performance figure of each run (empty when the app has none or one was unreadable)."""
    output_dir: str
    """The output folder of the last run, holding the outputs compared."""
    changed: list[str] = []
    """Files of the source or golden folder that changed during the runs (must stay empty)."""
    sandboxed: bool = False
    """Whether the app ran in the harness's sandbox (see the module's docstring)."""
    containment: str = ""
    """How it was contained, or why it ran without the sandbox."""


def hash_tree(folder: Path | None) -> dict[str, str]:
    """relative path -> SHA-256 of every file under folder (symlinks by their target text)."""
    if folder is None or not folder.exists():
        return {}
    hashes: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_symlink():
            hashes[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            hashes[rel] = file_sha256(path)
    return hashes


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_changes(before: dict[str, str], after: dict[str, str], label: str) -> list[str]:
    """The files added, removed or changed, as 'label/path (how)'."""
    changes = [f"{label}/{p} (added)" for p in after if p not in before]
    changes += [f"{label}/{p} (removed)" for p in before if p not in after]
    changes += [f"{label}/{p} (changed)" for p in before if p in after and before[p] != after[p]]
    return sorted(changes)


def command_for(spec: AppSpec) -> list[str]:
    """The argv of one run: the command ('python' is this interpreter) or the entry-point shim."""
    if spec.run.command is not None:
        return resolve_python(spec.run.command)
    assert spec.run.entry is not None  # exactly one of command or entry (Run's check)
    target, function = spec.run.entry.rsplit(":", 1)
    return [sys.executable, "-c", _ENTRY_SHIM, target, function, *spec.run.args]


def resolve_python(command: list[str]) -> list[str]:
    return [sys.executable, *command[1:]] if command[0] in ("python", "python3") else list(command)


def _tail(path: Path, limit: int) -> str:
    size = path.stat().st_size
    with path.open("rb") as handle:
        handle.seek(max(0, size - limit))
        return handle.read().decode("utf-8", errors="replace")


def run_once(command: list[str], cwd: Path, env: dict[str, str], time_limit_s: float) -> tuple[RunResult, str]:
    """Run one command in its own process group; kill the group at the time limit. Returns the
    result and the (end of) stdout for the performance regex. The path without the sandbox."""
    with tempfile.TemporaryDirectory(prefix="gpuarena-app-io-") as io_dir:
        out_path, err_path = Path(io_dir) / "stdout", Path(io_dir) / "stderr"
        start = time.perf_counter()
        with out_path.open("wb") as out, err_path.open("wb") as errf:
            try:
                process = subprocess.Popen(
                    command, cwd=cwd, env=env, stdout=out, stderr=errf, stdin=subprocess.DEVNULL, start_new_session=True
                )
            except OSError as exc:
                return RunResult(command=command, exit_code=None, wall_s=0.0, stderr_tail=f"cannot start: {exc}"), ""
            timed_out = False
            try:
                process.wait(timeout=time_limit_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # the whole group: a run that exits while its children go on leaves nothing behind
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                process.wait()
        wall = time.perf_counter() - start
        stdout = _tail(out_path, STDOUT_SCAN_BYTES)
        result = RunResult(
            command=command,
            exit_code=None if timed_out else process.returncode,
            timed_out=timed_out,
            wall_s=wall,
            stdout_tail=stdout[-TAIL_BYTES:],
            stderr_tail=_tail(err_path, TAIL_BYTES),
        )
        return result, stdout


def read_figure(performance: Performance, stdout: str, output_dir: Path) -> float:
    """The run's performance figure; ValueError says why it could not be read."""
    if performance.regex is not None:
        matches = list(re.finditer(performance.regex, stdout, flags=re.MULTILINE))
        if not matches:
            raise ValueError(f"performance regex {performance.regex!r} found nothing in stdout")
        match = matches[-1]  # the last report wins: apps often print warm-up figures first
        text = match.group(1) if match.groups() else match.group(0)
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"performance regex matched {text!r}, not a number") from None
    # no regex: a json_file and its json_key (Performance's check)
    assert performance.json_file is not None and performance.json_key is not None
    path = output_dir / performance.json_file
    if not path.is_file():
        raise ValueError(f"performance file {performance.json_file} was not written")
    try:
        value: object = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"performance file {performance.json_file} is not JSON: {exc}") from None
    for key in performance.json_key.split("."):
        if not isinstance(value, dict) or key not in value:
            raise ValueError(f"performance file {performance.json_file} has no key {performance.json_key!r}")
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{performance.json_file}:{performance.json_key} is {value!r}, not a number")
    return float(value)


def app_variables(spec: AppSpec, output_dir: Path, device: str) -> dict[str, str]:
    """The variables gpuarena gives every app."""
    return dict(
        GPUARENA_APP_SEED=str(spec.seed),
        GPUARENA_APP_OUTPUT=str(output_dir),
        GPUARENA_APP_DEVICE=device,
        PYTHONHASHSEED=str(spec.seed),
        PYTHONDONTWRITEBYTECODE="1",
    )


def app_env(spec: AppSpec, output_dir: Path, device: str) -> dict[str, str]:
    """An unsandboxed app's environment: the supervisor's, and the app's variables."""
    return {**os.environ, **app_variables(spec, output_dir, device)}


def sandbox_env(spec: AppSpec, output_dir: Path, device: str) -> dict[str, str]:
    """What a sandboxed app gets on top of the worker's environment: the app's variables, and
    the supervisor's thread settings (THREAD_CAPS) where it has them (unset otherwise)."""
    kept = {name: os.environ[name] for name in THREAD_CAPS if name in os.environ}
    return {**kept, **app_variables(spec, output_dir, device)}


def unsafe_outputs(folder: Path) -> list[str]:
    """What in the output folder is not a plain file or folder (symbolic links, devices, FIFOs,
    files with other hard links): the supervisor reads and copies the outputs with its own
    rights, so an app must not point it at a file it could not read itself."""
    found = []
    for parent, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(parent, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, folder)
            if stat.S_ISLNK(st.st_mode):
                found.append(f"{rel} (symbolic link)")
            elif stat.S_ISREG(st.st_mode):
                if st.st_nlink > 1:
                    found.append(f"{rel} (a file with {st.st_nlink} links)")
            elif not stat.S_ISDIR(st.st_mode):
                found.append(f"{rel} (not a plain file)")
    return sorted(found)


def run_app(
    app_dir: Path, spec: AppSpec, run_root: Path, device: str = "cpu", protected: dict[str, Path | None] | None = None
) -> AppRun:
    """Copy app_dir into run_root/work, run setup once and the app `spec.repeats` times there,
    in the harness's sandbox where it can run (else as plain subprocesses: the result says so).

    protected: label -> folder whose files must not change (the app's source folder is always
    protected as 'app'); the outputs of the last run are left in run_root/_gpuarena_output.
    """
    app_dir = Path(app_dir).resolve()
    run_root = Path(run_root).resolve()
    guarded = {"app": app_dir, **(protected or {})}
    before = {label: hash_tree(folder) for label, folder in guarded.items()}
    work = run_root / "work"
    output_dir = run_root / OUTPUT_DIR
    shutil.copytree(app_dir, work, symlinks=True)
    result = AppRun(ran=False, output_dir=str(output_dir))
    problem = containment.sandbox_problem()
    box = Sandbox(run_root, work, output_dir, device) if not problem else None
    if box is None:
        env = app_env(spec, output_dir, device)
        result.containment = (
            f"none: no sandbox ({problem}); the app ran as a plain subprocess of the supervisor's "
            "user with its environment; only the hash checks of the source and golden folders"
        )
    else:
        env = sandbox_env(spec, output_dir, device)
        result.sandboxed = True

    def execute(command: list[str]) -> tuple[RunResult, str]:
        if box is None:
            return run_once(command, work, env, spec.time_limit_s)
        done = run_sandboxed(command, box, env, spec.time_limit_s)
        result.containment = box.containment or result.containment
        result.sandboxed = result.sandboxed and box.sandboxed
        return done

    def changed() -> list[str]:
        return [c for label, folder in guarded.items() for c in tree_changes(before[label], hash_tree(folder), label)]

    def stop(reason: str) -> AppRun:
        result.changed = changed()
        if result.changed:
            reason = f"{reason}; it also wrote outside its working folder: {', '.join(result.changed[:5])}"
        result.reason = reason
        return result

    def fresh_output() -> None:
        if output_dir.exists():
            shutil.rmtree(output_dir)
        output_dir.mkdir()
        if box is not None:
            box.give(output_dir)

    fresh_output()
    for command in spec.setup:
        setup, _ = execute(resolve_python(command))
        result.setup.append(setup)
        if setup.timed_out:
            return stop(f"setup command {command} passed the time limit of {spec.time_limit_s:g} s")
        if setup.exit_code is None:
            return stop(f"setup command {command} could not be started: {setup.stderr_tail}")
        if setup.exit_code != 0:
            return stop(f"setup command {command} exited with status {setup.exit_code}")
    for index in range(spec.repeats):
        fresh_output()
        run, stdout = execute(command_for(spec))
        result.runs.append(run)
        label = f"run {index + 1} of {spec.repeats}"
        if run.timed_out:
            return stop(f"{label} passed the time limit of {spec.time_limit_s:g} s and was killed")
        if run.exit_code is None:
            return stop(f"{label} could not be started: {run.stderr_tail}")
        if run.exit_code != 0:
            return stop(f"{label} exited with status {run.exit_code}")
        unsafe = unsafe_outputs(output_dir)
        if unsafe:
            return stop(
                f"{label} left what is not a plain file in its output folder (not read): {', '.join(unsafe[:5])}"
            )
        if spec.performance is not None:
            try:
                run.figure = read_figure(spec.performance, stdout, output_dir)
            except ValueError as exc:
                run.figure_error = str(exc)
    result.changed = changed()
    if result.changed:
        result.reason = (
            "it wrote outside its working folder (an app may write only its working folder and "
            f"$GPUARENA_APP_OUTPUT): {', '.join(result.changed[:10])}"
        )
        return result
    result.figures = (
        [r.figure for r in result.runs if r.figure is not None]
        if all(r.figure is not None for r in result.runs)
        else []
    )
    result.ran = True
    return result
