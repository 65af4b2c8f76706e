"""Profile mode: the solution's call (and the reference's, for comparison) under Nsight Compute
on one workload, with the same isolation as a judged run.

For each side, a sandboxed worker process is started as for any run (its own user, no
network, the memory cap, the read-only view), but once its guards are applied it becomes ncu
(`sandbox.py --exec`), which runs `profile_child.py` on inputs the supervisor drew and
profiles the one call inside an NVTX range. ncu runs as the worker's user inside the sandbox,
so it sees nothing a solution may not; its report is written to a folder of the run's that
the sandbox may write, and read back with `ncu --import` by the supervisor. The supervisor
checks the profiled call's outputs against the reference, so a profile of a call that
computed something else says so. Nothing ranks on a profile.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import glob
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import torch

from gpuarena.contracts.profile_record import KernelProfile, ProfileRecord, ProfileSide
from gpuarena.contracts.records import Evaluation, Status
from gpuarena.errors import GpuarenaError
from gpuarena.harness.compare import compare, judged
from gpuarena.harness.device import peaks
from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.inside.sandbox import default_memory_limit, protect_supervisor, worker_identity
from gpuarena.harness.launch.process import WorkerProcess
from gpuarena.harness.launch.started import _switch
from gpuarena.harness.profile import ncu_report, roofline
from gpuarena.harness.profile.child import OUTPUTS
from gpuarena.harness.profile.ncu_report import NcuError
from gpuarena.harness.session import as_outputs, derive_seed
from gpuarena.problems.loader import Problem
from gpuarena.problems.model import Workload
from gpuarena.solutions.model import Solution

PROFILE_SEED = 20261126
"""Inputs of a profile are not secret (nothing ranks on them): drawn from a public seed."""
IMPORT_TIMEOUT_S = 120
PRIVILEGES = (
    "ncu could not read the GPU's performance counters (ERR_NVGPUCTRPERM): the driver lets only admin "
    "users read them, and the profiled process runs as a worker user of its own. Allow all users "
    "(NVreg_RestrictProfilingToAdminUsers=0) or, on a machine you trust, run workers as your own user "
    "(GPUARENA_WORKER_ISOLATION=0)"
)


class ProfileUnavailable(GpuarenaError):
    """Profile mode cannot run here (no GPU, no Nsight Compute): said before anything starts."""


def find_ncu() -> str | None:
    """ncu on PATH, in a CUDA toolkit, or in a standalone Nsight Compute installation; the
    installation's own program rather than the toolkit's bin/ncu, a script that looks for the
    installation in places the sandbox does not show (/opt/nvidia)."""
    found = shutil.which("ncu")
    candidates = [os.path.join(os.environ[v], "bin", "ncu") for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    candidates += ["/usr/local/cuda/bin/ncu", *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]
    ncu = found or next((c for c in candidates if os.access(c, os.X_OK)), None)
    if ncu is None:
        return None
    toolkit = os.path.dirname(os.path.dirname(os.path.realpath(ncu)))
    installed = sorted(glob.glob(os.path.join(toolkit, "nsight-compute*", "ncu")), reverse=True)
    installed += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    return next((c for c in installed if os.access(c, os.X_OK)), ncu)


def _installation(ncu: str) -> str:
    """The folder ncu needs to see of itself: its bin folder's parent, or its own folder."""
    folder = os.path.dirname(os.path.realpath(ncu))
    return os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder


def pick_workload(problem: Problem, name: str | None, device: str = "cuda") -> Workload:
    """The named workload, or the problem's first on this kind of device."""
    kind = "cuda" if device.startswith("cuda") else "cpu"
    runnable = [w for w in problem.spec.workloads if kind in w.devices]
    if name is None:
        if not runnable:
            raise GpuarenaError(f"{problem.id} has no workload that runs on {kind}")
        return runnable[0]
    for w in runnable:
        if w.name == name:
            return w
    raise GpuarenaError(
        f"--workload {name}: not a {kind} workload of {problem.id} (it has: {', '.join(w.name for w in runnable)})"
    )


def preflight(device: str) -> str:
    """ncu's path, or why profile mode cannot run here."""
    if not device.startswith("cuda"):
        raise ProfileUnavailable("profile mode runs Nsight Compute on an NVIDIA GPU: use --device cuda")
    if not torch.cuda.is_available():
        raise ProfileUnavailable("profile mode needs an NVIDIA GPU, and PyTorch sees none here")
    ncu = find_ncu()
    if ncu is None:
        raise ProfileUnavailable(
            "Nsight Compute (ncu) was not found on PATH, in $CUDA_HOME/bin, /usr/local/cuda/bin "
            "or /opt/nvidia/nsight-compute: install it (it comes with the CUDA toolkit)"
        )
    return ncu


def run_profile(
    problem: Problem,
    solution: Solution,
    device: str,
    out_dir: Path,
    workload: str | None = None,
    timeout_s: float = 600.0,
    progress: Callable[[str], None] = lambda _: None,
    ncu: str | None = None,
) -> ProfileRecord:
    """Profile both sides on one workload; reports and the roofline go to out_dir. `ncu` given:
    that program instead of the one preflight() finds (the tests' stand-in, on the CPU)."""
    ncu = ncu or preflight(device)
    chosen = pick_workload(problem, workload, device)
    dev = torch.device(device)
    progress(f"drawing inputs for {chosen.name}")
    generator = torch.Generator(device=dev).manual_seed(derive_seed(PROFILE_SEED, chosen.name, "profile"))
    inputs = problem.make_inputs(dict(chosen.axes), chosen.torch_dtype, dev, generator)
    seed = derive_seed(PROFILE_SEED, chosen.name, "call") if problem.spec.seeded_calls else None
    if seed is not None:  # a reference that draws in its calls: each side's calls seeded alike
        backend_named(dev.type).seed(dev, seed)
    with torch.no_grad():
        expected = as_outputs(problem.reference(**inputs))
    record: dict[str, Any] = dict(
        problem=problem.id,
        solution=solution.name,
        workload=chosen.name,
        device=device,
        status="PASSED",
        ncu_version=_version(ncu),
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    run = Path(tempfile.mkdtemp(prefix="gpuarena-profile-"))
    try:
        torch.save({k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}, run / "inputs.pt")
        torch.save(
            [
                torch.full_like(t, float("nan")).cpu() if t.is_floating_point() else torch.zeros_like(t).cpu()
                for t in expected
            ],
            run / "dests.pt",
        )
        (run / "solution.json").write_text(solution.model_dump_json())
        shutil.copytree(problem.path, run / "problem")
        for side in ("solution", "reference"):
            progress(f"profiling the {side} under ncu")
            convention = solution.manifest.convention_for(problem.spec.convention) if side == "solution" else "return"
            outputs, record[f"{side}_profile"] = _side(ncu, run, side, convention, device, out_dir, timeout_s, seed)
            if side == "solution":
                record.update(_check(problem, chosen, outputs, expected, inputs))
    except ProfileFailure as failure:
        record.update(status=failure.status, reason=failure.reason)
    finally:
        shutil.rmtree(run, ignore_errors=True)
    if dev.type == "cuda":
        record["peaks"] = peaks.device_peaks(dev, None, torch.cuda.get_device_name(dev))
    partial = ProfileRecord(**record)
    plot = out_dir / "roofline.svg"
    plot.write_text(roofline.for_record(partial))
    return partial.model_copy(update={"roofline": str(plot)})


class ProfileFailure(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status, self.reason = status, reason


def _side(
    ncu: str,
    run: Path,
    side: str,
    convention: str,
    device: str,
    out_dir: Path,
    timeout_s: float,
    seed: int | None = None,
) -> tuple[list[Any], ProfileSide]:
    """One side under ncu in the sandbox (called in `convention`, torch's generators seeded with
    `seed` before each call where given): its outputs and its profile."""
    isolate = _switch("GPUARENA_WORKER_ISOLATION", True)
    user = worker_identity() if isolate else None
    # outside the run's folder, which the sandbox binds read-only over anything inside it
    written = Path(tempfile.mkdtemp(prefix=f"gpuarena-profile-{side}-"))
    workdir = run / f"{side}-work"
    workdir.mkdir(mode=0o700)
    if user is not None:
        os.chmod(run, 0o711)
        for folder in (written, workdir):
            os.chown(folder, user[0], user[1])
    spec = {
        "device": device,
        "inputs": str(run / "inputs.pt"),
        "dests": str(run / "dests.pt"),
        "convention": convention,
        "out": str(written),
        "solution": str(run / "solution.json") if side == "solution" else None,
        "reference": str(run / "problem") if side == "reference" else None,
        "seed": seed,
    }
    spec_path = run / f"{side}-spec.json"
    spec_path.write_text(json.dumps(spec))
    report_base = written / side
    target = [sys.executable, "-m", "gpuarena.harness.profile.child", str(spec_path)]
    command = ncu_report.profile_command(ncu, str(report_base), target)
    if isolate:
        protect_supervisor(True)
    worker = WorkerProcess(
        workdir,
        run / f"{side}.log",
        isolate_network=True,
        memory_limit=default_memory_limit(),
        user=user,
        gpu=True,
        exec_argv=command,
        readable=[_installation(ncu)],
        writable=[str(written)],
    )
    try:
        try:
            code = worker.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise ProfileFailure("TIMEOUT", f"profiling the {side} took longer than {timeout_s:.0f} s") from None
        log = worker.read_log()
    finally:
        worker.close()
        if isolate:
            protect_supervisor(False)
    try:
        report = report_base.with_suffix(".ncu-rep")
        kept = out_dir / report.name
        with _written_by_the_sandbox(written, report.name) as reader:
            if reader is None:
                raise ProfileFailure("RUNTIME_ERROR", _why(log, side, code))
            with open(kept, "wb") as writer:
                shutil.copyfileobj(reader, writer, 1 << 20)
        try:
            kernels = _import(ncu, kept)
        except NcuError as exc:
            raise ProfileFailure("RUNTIME_ERROR", f"ncu's report of the {side} could not be read: {exc}") from None
        if not kernels:
            raise ProfileFailure(
                "RUNTIME_ERROR",
                f"ncu profiled no kernel in the {side}'s call: it launched no GPU work inside the profiled range",
            )
        with _written_by_the_sandbox(written, OUTPUTS) as reader:
            outputs = torch.load(reader, weights_only=True) if reader is not None else None
        if outputs is None:
            raise ProfileFailure("RUNTIME_ERROR", _why(log, side, code))
        return outputs, ProfileSide(kernels=kernels, report=str(kept))
    finally:
        shutil.rmtree(written, ignore_errors=True)


@contextlib.contextmanager
def _written_by_the_sandbox(folder: Path, name: str) -> Iterator[BinaryIO | None]:
    """A file the sandbox wrote into `folder`, opened without following a link (the solution
    may plant one where ncu writes its report: the supervisor, as root, copied a root-only host
    file into the report folder that way); None unless it is a regular file with one name (a
    hard link to a file of the host's is not the report either)."""
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder_fd)
        except OSError:
            yield None
            return
        with os.fdopen(fd, "rb") as reader:
            info = os.fstat(fd)
            yield reader if stat.S_ISREG(info.st_mode) and info.st_nlink == 1 else None
    finally:
        os.close(folder_fd)


def _why(log: str, side: str, code: int | None) -> str:
    """The reason a side gave no report: ncu's own errors first, else the log's tail."""
    if "ERR_NVGPUCTRPERM" in log:
        return PRIVILEGES
    errors = [line for line in log.splitlines() if "==ERROR==" in line or "Error" in line]
    tail = errors[-3:] or log.strip().splitlines()[-5:]
    return f"the {side}'s profiled run ended (exit {code}) without a report: " + " | ".join(tail)[-1500:]


def _import(ncu: str, report: Path) -> list[KernelProfile]:
    try:
        done = subprocess.run(
            ncu_report.import_command(ncu, str(report)),
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            env={**os.environ, "LC_ALL": "C"},
        )
    except subprocess.TimeoutExpired:
        raise NcuError(f"ncu --import took over {IMPORT_TIMEOUT_S} s") from None
    return ncu_report.parse_raw_csv(done.stdout + "\n" + done.stderr)


def _check(
    problem: Problem, workload: Workload, outputs: list[Any], expected: tuple[torch.Tensor, ...], inputs: dict[str, Any]
) -> dict:
    """Whether the profiled call computed the reference's outputs (the problem's tolerance, or
    its own checker)."""
    if not isinstance(outputs, list) or len(outputs) != len(expected):
        return {
            "status": "WRONG_VALUES",
            "reason": f"the profiled call returned {len(outputs) if isinstance(outputs, list) else outputs!r} "
            f"outputs, expected {len(expected)}",
        }
    if problem.checker is not None and all(isinstance(out, torch.Tensor) for out in outputs):
        cpu = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        verdict = judged(problem.checker, problem.spec.outputs, outputs, tuple(r.cpu() for r in expected), cpu)
        return {} if verdict.ok else {"status": verdict.status, "reason": f"the profiled call's {verdict.reason}"}
    tol = problem.spec.tolerance_for(workload.dtype)
    for name, out, ref in zip(problem.spec.outputs, outputs, expected):
        if not isinstance(out, torch.Tensor):
            return {"status": "WRONG_VALUES", "reason": f"output {name} of the profiled call is not a tensor"}
        verdict = compare(name, out, ref.cpu(), tol)
        if not verdict.ok:
            return {"status": verdict.status, "reason": f"the profiled call's {verdict.reason}"}
    return {}


def _version(ncu: str) -> str:
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.splitlines()[-1] if out else ""


def profile_evaluation(
    problem: Problem,
    solution: Solution,
    device: str,
    workloads: list[str] | None,
    timeout_s: float,
    progress: Callable[[str], None] | None = None,
) -> Evaluation:
    """Profile mode as an Evaluation record (what runners and the service keep): the profile in
    it, the reports' file names only (the files stay with the run), never a score."""
    started = time.monotonic()
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    def finished(**fields: Any) -> Evaluation:
        return solution.record(problem.id, device, "profile", started_at=at, **fields)

    if workloads and len(workloads) > 1:
        return finished(status=Status.RUNTIME_ERROR, reason="profile mode profiles one workload: name one")
    out = Path(tempfile.mkdtemp(prefix="gpuarena-profile-reports-"))
    try:
        record = run_profile(
            problem,
            solution,
            device,
            out,
            workload=workloads[0] if workloads else None,
            timeout_s=timeout_s,
            progress=progress or (lambda _: None),
        )
    except GpuarenaError as exc:
        return finished(status=Status.RUNTIME_ERROR, reason=str(exc), duration_s=round(time.monotonic() - started, 2))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    names = {
        f"{side}_profile": getattr(record, f"{side}_profile").model_copy(
            update={"report": Path(getattr(record, f"{side}_profile").report).name}
        )
        for side in ("solution", "reference")
    }
    record = record.model_copy(update={**names, "roofline": ""})
    return finished(
        status=Status(record.status),
        reason=record.reason,
        profile=record,
        duration_s=round(time.monotonic() - started, 2),
    )
