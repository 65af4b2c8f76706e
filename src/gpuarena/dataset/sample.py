"""A community sample, as the CCF dataset track defines one: a problem from a real model, the
prompt that made an LLM write a first kernel for it, that first kernel, the optimised kernel,
and a short report (which model the operator comes from, and why its weight). `check_sample`
decides whether one may go to review: the problem passes `gpuarena check`, both kernels pass
the harness on the device, their speed-ups are measured, and the problem is not one the
dataset already has (the same computation, however written: dataset/fingerprint.py's canonical
fingerprint). The sample's recorded score is its optimised kernel's speed-up over the canonical
reference (dataset/sample_score.py), never over the contributor's reference alone, and its
weight is the dataset's (dataset/sample_weight.py).

A sample folder (docs/dataset.md):

    sample.toml     [sample] contributor, llm, and where the parts are (defaults below)
    problem/        a gpuarena problem: problem.toml and reference.py
    prompt.md       the prompt that produced the first kernel
    first.py        the first LLM-generated kernel (any gpuarena solution: a file or a folder)
    optimised.py    the optimised kernel
    report.md       the operator's model, and why its weight
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gpuarena.errors import GpuarenaError

SAMPLE_FILE = "sample.toml"
MIN_REPORT_WORDS = 20
"""A report shorter than this cannot say where the operator comes from and why its weight."""


class SampleManifest(BaseModel):
    """sample.toml's [sample] table."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    contributor: str = Field(min_length=1)
    """Who made the sample (a service user name where it is submitted there)."""
    llm: str = Field(min_length=1)
    """The LLM that wrote the first kernel from the prompt, with its version."""
    problem: str = "problem"
    prompt: str = "prompt.md"
    first: str = "first.py"
    optimised: str = "optimised.py"
    report: str = "report.md"


class KernelResult(BaseModel):
    """One of the sample's kernels through the harness."""

    status: str
    score: float | None = None
    """Its speed-up over the reference (the harness's score), when it passed."""
    reason: str = ""


class DuplicateOf(BaseModel):
    """A dataset problem that runs the same operators on the same shapes as the sample's."""

    problem: str
    workloads: dict[str, str]
    """The sample's workloads matched, each to the dataset problem's workload it repeats."""
    whole: bool
    """Every workload of the sample repeats one of the problem's: the sample adds nothing."""


class SampleReport(BaseModel):
    """What `gpuarena sample check` found: `ok` when the sample may go to review."""

    sample: str
    device: str
    verdict: Literal["ok", "duplicate", "broken"]
    errors: list[str] = Field(default_factory=list)
    problem: str = ""
    """The problem's name and what `gpuarena check` said of it."""
    problem_check: str = ""
    first: KernelResult | None = None
    optimised: KernelResult | None = None
    optimised_over_first: float | None = None
    """The optimised kernel's speed-up over the first one (the ratio of their scores)."""
    duplicates: list[DuplicateOf] = Field(default_factory=list)
    score: float | None = None
    """The sample's recorded score (what a ccf-dataset contest counts): the optimised kernel's
    speed-up over the canonical reference (dataset/sample_score.py)."""
    score_basis: str = ""
    """What `score` is over: the dataset's reference for the computation, the reference's
    canonical graph, or why there is no score."""
    reference_slowdown: float | None = None
    """How many times slower the contributor's reference ran than the canonical one."""
    notes: list[str] = Field(default_factory=list)
    """What the check overrode without failing the sample (a contributor-set weight)."""

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def read_manifest(folder: Path) -> SampleManifest:
    path = folder / SAMPLE_FILE
    if not path.is_file():
        raise GpuarenaError(
            f"{folder}: no {SAMPLE_FILE} (fix: a [sample] table with contributor and llm; see docs/dataset.md)"
        )
    try:
        text = path.read_text()
    except UnicodeDecodeError as exc:
        raise GpuarenaError(f"{path}: not valid TOML: {exc}") from None
    return parse_manifest(text, path)


def parse_manifest(text: str, where: Path | str) -> SampleManifest:
    """sample.toml's text as its [sample] table; errors name the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GpuarenaError(f"{where}: not valid TOML: {exc}") from None
    try:
        return SampleManifest.model_validate(data.get("sample", {}))
    except ValidationError as exc:
        loc = "; ".join(f"sample.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise GpuarenaError(f"{where}: {loc}") from None


def layout_errors(folder: Path, manifest: SampleManifest) -> list[str]:
    """What is missing, empty or outside the folder among the sample's parts: found without
    running anything, so a server can refuse such a sample at the door."""
    errors = []
    for part in ("problem", "prompt", "first", "optimised", "report"):
        path = folder / getattr(manifest, part)
        if not path.resolve().is_relative_to(folder.resolve()):
            errors.append(f"{part}: {getattr(manifest, part)} is outside the sample's folder")
        elif not path.exists():
            errors.append(f"{part}: {path} does not exist")
        elif path.is_file() and not path.read_text(errors="replace").strip():
            errors.append(f"{part}: {path} is empty")
    report = folder / manifest.report
    if report.is_file() and 0 < len(report.read_text(errors="replace").split()) < MIN_REPORT_WORDS:
        errors.append(
            f"report: {report} has fewer than {MIN_REPORT_WORDS} words (fix: say which model the "
            "operator comes from, in which layer and phase, and why the problem's weight)"
        )
    return errors


def find_duplicates(problem_folder: Path, roots: list[Path]) -> list[DuplicateOf]:
    """The problems under `roots` whose workloads the sample's problem repeats (the same
    computation on the same data, however written: the canonical fingerprint)."""
    from gpuarena.dataset.fingerprint import fingerprints, index, matches
    from gpuarena.problems.loader import load_problem

    ours = fingerprints(load_problem(problem_folder), canonical=True)
    if not ours:
        return []
    matched = matches(ours, index(roots, skip=problem_folder, canonical=True))
    return [
        DuplicateOf(problem=problem, workloads=pairs, whole=len(pairs) == len(ours))
        for problem, pairs in sorted(matched.items())
    ]


def dataset_matches(duplicates: list[DuplicateOf], roots: list[Path]) -> dict[str, tuple[str, Path, str]]:
    """The sample's workloads a dataset problem computes: each to that problem's id, folder and
    workload (the first problem found), for the canonical score."""
    found: dict[str, tuple[str, Path, str]] = {}
    for dup in duplicates:
        folder = next((r / dup.problem for r in roots if (r / dup.problem / "problem.toml").is_file()), None)
        if folder is None:
            continue
        for ours, theirs in dup.workloads.items():
            found.setdefault(ours, (dup.problem, folder, theirs))
    return found


def _kernel(problem_folder: Path, solution: Path, device: str, budget_s: float) -> KernelResult:
    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems.loader import load_problem
    from gpuarena.solutions import load_solution

    try:
        loaded = load_solution(solution)
    except GpuarenaError as exc:
        return KernelResult(status="COMPILE_ERROR", reason=str(exc))
    record = evaluate(load_problem(problem_folder), loaded, RunOptions(device=device, budget_s=budget_s))
    return KernelResult(status=record.status.value, score=record.score, reason=record.reason or "")


def _weights(problem_folder: Path, report: SampleReport) -> None:
    """A contributor-set weight is a note (the dataset overrides it); one it cannot override is an error."""
    from gpuarena.dataset.sample_weight import weight_note, with_dataset_weight

    text = (problem_folder / "problem.toml").read_text()
    try:
        with_dataset_weight(text)
    except ValueError as exc:
        report.errors.append(f"problem: {exc}")
        return
    note = weight_note(text)
    if note:
        report.notes.append(note)


def check_sample(
    folder: Path, device: str = "cpu", dataset: list[Path] | None = None, budget_s: float = 0.5
) -> SampleReport:
    """Check a sample folder (see the module docstring). `dataset`: the problem roots it must
    not repeat (default: the bundled problems)."""
    from gpuarena.bundled import bundled_root
    from gpuarena.harness.problem_check import check_problem
    from gpuarena.problems.loader import load_problem

    report = SampleReport(sample=str(folder), device=device, verdict="broken")
    try:
        manifest = read_manifest(folder)
    except GpuarenaError as exc:
        report.errors.append(str(exc))
        return report
    report.errors += layout_errors(folder, manifest)
    if any("outside the sample's folder" in e for e in report.errors):
        return report  # nothing outside the folder is run
    problem_folder = folder / manifest.problem
    if not (problem_folder / "problem.toml").is_file():
        report.errors.append(f"problem: {problem_folder} holds no problem.toml")
        return report
    checked = check_problem(problem_folder, device=device)
    report.problem_check = checked.summary
    if checked.ok:
        report.problem = load_problem(problem_folder).spec.name
    if not checked.ok:
        report.errors += [f"problem: {e}" for e in checked.errors]
        return report
    for part in ("first", "optimised"):
        path = folder / getattr(manifest, part)
        if path.exists():
            result = _kernel(problem_folder, path, device, budget_s)
            setattr(report, part, result)
            if result.status != "PASSED":
                report.errors.append(f"{part}: {path.name} is {result.status}: {result.reason}")
    if report.first and report.optimised and report.first.score and report.optimised.score:
        report.optimised_over_first = report.optimised.score / report.first.score
    roots = dataset if dataset is not None else [bundled_root()]
    report.duplicates = find_duplicates(problem_folder, roots)
    _weights(problem_folder, report)
    if report.errors:
        return report
    from gpuarena.dataset.sample_score import canonical_score

    scored = canonical_score(
        load_problem(problem_folder),
        device,
        report.optimised.score if report.optimised else None,
        dataset_matches(report.duplicates, roots),
    )
    report.score, report.score_basis, report.reference_slowdown = scored.score, scored.basis, scored.reference_slowdown
    report.verdict = "duplicate" if any(d.whole for d in report.duplicates) else "ok"
    return report
