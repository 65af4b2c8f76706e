"""A sample's check on a runner: `gpuarena sample check` on the submitted folder, on the runner's
device, against the runner's bundled problems and the samples the service accepted so far (sent
with the job). The SampleReport goes back beside an Evaluation record, which the queue stores like
any other: PASSED when the verdict is ok, REJECTED (with the verdict and its reasons) when the
sample is a duplicate or broken. Its score stays empty: a sample's speed-ups are the report's,
not a leaderboard's.

A sample's problem is the contributor's code: its reference runs where a problem's reference
runs, in the supervisor. So the whole check runs in the harness's sandbox, as an app of the
migration checks does (migration/sandboxed.py): a user of its own, no network, nothing of the
runner's but the Python installation and the copies it is given, killed at the time limit. A
runner without the sandbox refuses to check samples. Inside it the check's own workers share
the sandbox (one bubblewrap cannot start another), so the report is the contributor's to
forge: it is read as untrusted data (bounded, validated), and an organizer accepts a sample by
hand (service/samples.py)."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
import time
from pathlib import Path

from pydantic import ValidationError

from gpuarena.contracts.packed import PackedProblem, evaluation_hash
from gpuarena.contracts.records import Evaluation, Mode, Status
from gpuarena.dataset.sample import SampleReport
from gpuarena.dataset.sample_pack import SAMPLES_SLUG
from gpuarena.errors import GpuarenaError
from gpuarena.solutions.folder import write_files
from gpuarena.solutions.model import Solution

REASON_CHARS = 2000
CHECK_LIMIT_S = 900.0
"""The sandboxed check's time limit: the problem's check and two kernels judged on every workload."""
MAX_REPORT_BYTES = 1 << 20


def reason(report: SampleReport) -> str:
    """One line for the submission's list: the verdict and why."""
    if report.verdict == "ok":
        speed = f": optimised {report.score:.2f}x over the canonical reference" if report.score else ""
        return f"ok{speed}"
    if report.verdict == "duplicate":
        return "duplicate: repeats " + ", ".join(d.problem for d in report.duplicates if d.whole)
    return ("broken: " + "; ".join(report.errors))[:REASON_CHARS]


def _without(report: SampleReport, folder: Path, name: str) -> SampleReport:
    """The report without the job's temporary folder in it (the sample is named by its name)."""
    text = report.model_dump_json().replace(str(folder) + "/", "").replace(str(folder), name)
    return SampleReport.model_validate_json(text).model_copy(update={"sample": name})


def check_sample_job(
    dataset: PackedProblem, solution: Solution, device: str, mode: Mode, budget_s: float
) -> tuple[Evaluation, SampleReport]:
    """Check the sample; a sample that cannot even be written out is broken, with the reason."""
    from gpuarena.bundled import bundled_root

    started, t0 = dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gpuarena-sample-") as root:
        try:
            if evaluation_hash(dataset.files) != dataset.hash:
                raise GpuarenaError("the accepted samples sent with the job do not match their hash")
            accepted = write_files(dict(dataset.files), Path(root) / "accepted", "the accepted samples")
            folder = write_files(dict(solution.sources), Path(root) / "sample", "the sample")
        except GpuarenaError as exc:
            report = SampleReport(sample=solution.name, device=device, verdict="broken", errors=[str(exc)])
        else:
            report = _without(
                contained_check(folder, [bundled_root(), accepted], device, budget_s), folder, solution.name
            )
    evaluation = solution.record(
        SAMPLES_SLUG,
        device,
        mode,
        started_at=started,
        status=Status.PASSED if report.ok else Status.REJECTED,
        reason=reason(report),
        duration_s=time.monotonic() - t0,
    )
    return evaluation, report


def _broken(folder: Path, device: str, why: str) -> SampleReport:
    return SampleReport(sample=str(folder), device=device, verdict="broken", errors=[why])


def contained_check(
    folder: Path, dataset: list[Path], device: str, budget_s: float, time_limit_s: float = CHECK_LIMIT_S
) -> SampleReport:
    """`gpuarena sample check` on folder in the harness's sandbox, against copies of the
    dataset's problem roots; its report read back as untrusted data."""
    from gpuarena.harness.launch import containment
    from gpuarena.migration.runner import OUTPUT_DIR
    from gpuarena.migration.sandboxed import Sandbox, run_sandboxed

    problem = containment.sandbox_problem()
    if problem:
        return _broken(
            folder,
            device,
            f"this runner cannot check samples: a sample's problem and kernels run only "
            f"in the harness's sandbox, and there is none here ({problem})",
        )
    with tempfile.TemporaryDirectory(prefix="gpuarena-sample-check-") as tmp:
        run_root = Path(tmp)
        work, output_dir = run_root / "work", run_root / OUTPUT_DIR
        work.mkdir()
        output_dir.mkdir()
        shutil.copytree(folder, work / "sample")
        roots = []
        for k, root in enumerate(dataset):
            if root.is_dir():
                shutil.copytree(root, work / f"dataset-{k}", ignore=shutil.ignore_patterns("__pycache__"))
                roots += ["--problems", str(work / f"dataset-{k}")]
        box = Sandbox(run_root, work, output_dir, device)
        box.give(output_dir)
        out = output_dir / "report.json"
        command = [
            sys.executable,
            "-m",
            "gpuarena.cli",
            "sample",
            "check",
            str(work / "sample"),
            "--device",
            device,
            *roots,
            "--budget",
            str(budget_s),
            "--json",
            str(out),
        ]
        # one sandbox cannot start another: the check's workers are its own processes in this one
        env = {"GPUARENA_SANDBOX": "0", "GPUARENA_WORKER_ISOLATION": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        run, _ = run_sandboxed(command, box, env, time_limit_s)
        if run.timed_out:
            return _broken(folder, device, f"the check passed its time limit of {time_limit_s:g} s and was killed")
        if not out.is_file() or out.is_symlink():
            return _broken(
                folder, device, f"the check wrote no report (exit status {run.exit_code}): {run.stderr_tail[-800:]}"
            )
        if out.stat().st_size > MAX_REPORT_BYTES:
            return _broken(folder, device, f"the check's report is larger than {MAX_REPORT_BYTES} bytes")
        try:
            report = SampleReport.model_validate_json(out.read_bytes())
        except ValidationError as exc:
            return _broken(folder, device, f"the check's report is not a sample report: {str(exc)[:300]}")
    # the report names the sandbox's copies: name them as the job's folder
    text = report.model_dump_json().replace(str(work / "sample"), str(folder))
    return SampleReport.model_validate_json(text)
