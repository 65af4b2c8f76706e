"""Dataset samples on the service: a sample folder travels as a Solution of language "sample"
(its text files, sample.toml among them) submitted to the service's one problem of kind
"sample", `samples`. So a sample's check is queued, leased, run on a runner, retried and
stored like any submission, enters a contest like one, and its files (the kernels' code) are
shown to whom a submission's code is shown (docs/dataset.md, "Samples through the service").

Nothing here runs a sample's code: the server reads sample.toml and problem.toml as TOML and
checks that the parts are there; the runner's job (dataset/sample_job.py) runs the check.
"""

from __future__ import annotations

import tempfile
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gpuarena.contracts.packed import PackedProblem, evaluation_hash
from gpuarena.dataset.sample import SAMPLE_FILE, SampleManifest, layout_errors, parse_manifest, read_manifest
from gpuarena.errors import GpuarenaError
from gpuarena.solutions.folder import text_files, write_files
from gpuarena.solutions.model import Solution, SolutionManifest

SAMPLE_LANGUAGE = "sample"
"""The solution language of a sample folder."""
SAMPLE_KIND = "sample"
"""The problem spec's "kind" of the service's samples problem."""
SAMPLES_SLUG = "samples"
"""The problem every sample is submitted to (and a ccf-dataset contest that takes samples lists)."""
MAX_SAMPLE_BYTES = 2_000_000
"""A sample is code and Markdown: a problem, two kernels, a prompt and a report."""

SAMPLES_README = """# Dataset samples

Not a problem to solve: every community sample (docs/dataset.md) is submitted here, with
`gpuarena sample submit DIR`, and checked on a runner by `gpuarena sample check`. Organizers
accept or reject checked samples on /samples; accepted ones join the dataset
(`gpuarena dataset pull`) and count for a `ccf-dataset` contest that lists `samples` among
its problems.
"""


def is_sample(spec: dict[str, Any]) -> bool:
    """Whether a stored problem spec is the samples problem."""
    return spec.get("kind") == SAMPLE_KIND


def samples_problem() -> tuple[PackedProblem, dict[str, Any]]:
    """The samples problem as the catalog stores it: a README, no workloads."""
    files = {"README.md": SAMPLES_README}
    spec = {
        "kind": SAMPLE_KIND,
        "name": SAMPLES_SLUG,
        "level": 0,
        "weight": 0.0,
        "tags": ["dataset"],
        "summary": "Community dataset samples: submit with `gpuarena sample submit`, reviewed on /samples.",
        "workloads": [],
    }
    return PackedProblem(id=SAMPLES_SLUG, files=files, hash=evaluation_hash(files)), spec


class SampleInfo(BaseModel):
    """What the server reads from a sample's files without running anything."""

    manifest: SampleManifest
    problem: str
    """The problem's name in its problem.toml (the folder's name where that has none)."""


def sample_solution(folder: Path) -> Solution:
    """A sample folder as a submission: refused here, with every reason, when it is not a
    sample or lacks a part (so nothing is sent that a runner would only call broken)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise GpuarenaError(f"{folder}: not a folder (a sample is a folder with {SAMPLE_FILE}; docs/dataset.md)")
    inspect(folder)
    sources = text_files(folder, MAX_SAMPLE_BYTES, "a sample", "a problem makes its inputs in make_inputs()")
    return Solution(
        name=folder.resolve().name,
        sources=sources,
        manifest=SolutionManifest(language=SAMPLE_LANGUAGE, entry_point=SAMPLE_FILE),
    )


def inspect(folder: Path) -> SampleInfo:
    """sample.toml and the parts, checked without running anything; raises naming every fault."""
    manifest = read_manifest(folder)
    errors = layout_errors(folder, manifest)
    problem_toml = folder / manifest.problem / "problem.toml"
    if not errors and not problem_toml.is_file():
        errors.append(f"problem: {folder / manifest.problem} holds no problem.toml")
    if errors:
        raise GpuarenaError(f"{folder} is not a complete sample: " + "; ".join(errors))
    try:
        name = str(tomllib.loads(problem_toml.read_text()).get("name") or "")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        name = ""  # the check on the runner names what is wrong with it
    return SampleInfo(manifest=manifest, problem=name or Path(manifest.problem).name)


def inspect_solution(solution: Solution) -> SampleInfo:
    """inspect() on a submitted sample's files (the server's check at the door)."""
    if solution.manifest.language != SAMPLE_LANGUAGE:
        raise GpuarenaError(f"not a sample: a {solution.manifest.language} solution")
    with tempfile.TemporaryDirectory(prefix="gpuarena-sample-") as tmp:
        return inspect(write_files(dict(solution.sources), Path(tmp) / "sample", "the sample"))


def problem_files(solution: Solution) -> dict[str, str]:
    """The sample's problem folder's files (relative to it), as the dataset takes them: with the
    dataset's weight in problem.toml, not the contributor's (dataset/sample_weight.py)."""
    from gpuarena.dataset.sample_weight import with_dataset_weight

    manifest = parse_manifest(solution.sources[SAMPLE_FILE], SAMPLE_FILE)
    prefix = Path(manifest.problem).as_posix().strip("/") + "/"
    files = {name[len(prefix) :]: text for name, text in solution.sources.items() if name.startswith(prefix)}
    if "problem.toml" in files:
        try:
            files["problem.toml"], _ = with_dataset_weight(files["problem.toml"])
        except (ValueError, tomllib.TOMLDecodeError):
            pass  # such a sample's check is broken (sample.check_sample), so it is never accepted
    return files


def pack_dataset(problems: dict[str, dict[str, str]]) -> PackedProblem:
    """Problem folders (id -> files) as one packed root: what a sample's check compares with
    besides the runner's bundled problems (the samples accepted so far)."""
    files = {f"{pid}/{name}": text for pid, folder in sorted(problems.items()) for name, text in folder.items()}
    return PackedProblem(id=SAMPLES_SLUG, files=files, hash=evaluation_hash(files))
