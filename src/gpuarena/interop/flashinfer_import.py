"""FlashInfer-Trace into gpuarena: a Definition and its workloads as a problem folder, a
Solution as a solution folder.

A problem imported from definition D is a folder holding

- `problem.toml`: one gpuarena workload per FlashInfer workload, named by its uuid, with the
  constant and variable axes' sizes and the dtype of D's outputs;
- `reference.py`: D's reference verbatim, then a marker line, then glue: `reference()` calls
  `run()` with D's inputs, `make_inputs()` draws each tensor input at its declared shape and
  dtype, passes each scalar input its value and None for an optional input the workloads omit;
- `flashinfer.json`: D itself, the scalar inputs' values and the omitted optional inputs, and,
  where the workloads' inputs differ beyond axes (safetensors data, an optional input some leave
  out), each workload's inputs, numbered by a gpuarena-only axis (the glue reads it, and
  `flashinfer_export.export_definition` gives D and its workloads back);
- `flashinfer_inputs.json`: the workloads' safetensors tensors, read at import (flashinfer_data);
- `README.md`: D's description, axes, inputs and outputs.

Whatever D or its workloads need that gpuarena's problem format cannot carry is refused with
an `UnsupportedFeature` error naming the feature: the import never writes a problem that
differs from the definition.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gpuarena.errors import FormatError, GpuarenaError
from gpuarena.interop import flashinfer_reader  # noqa: F401  (its reader, for the staged folder)
from gpuarena.interop.flashinfer_data import dataset_roots
from gpuarena.interop.flashinfer_problem import (  # the problem's files
    _elements,
    _toml_list,
    _toml_str,
    problem_files,
)
from gpuarena.interop.flashinfer_sidecar import (  # the sidecars and names
    ADAPTER_FILE,
    SIDECAR,
    SolutionSidecar,
    UnsupportedFeature,
    gpuarena_language,
    read_problem_sidecar,
)
from gpuarena.interop.flashinfer_trace import Definition, Solution, read_definition, read_solution, read_workloads
from gpuarena.interop.unchecked import devices_not_checked, mark_unchecked
from gpuarena.problems.loader import REFERENCE_FILE, Problem, load_problem, load_spec
from gpuarena.solutions.loader import MANIFEST_FILE, load_solution
from gpuarena.solutions.model import COMPILED_LANGUAGES, unsafe_source_name


@dataclass
class ImportResult:
    folder: Path
    notes: list[str] = field(default_factory=list)
    """Things worth knowing that are not errors (a CPU workload added, none possible)."""


def _verify(problem: Problem, definition: Definition) -> None:
    """Run the reference on the smallest CPU workload: its outputs must have the definition's
    shapes and dtypes (the definition and its reference must agree)."""
    import torch

    from gpuarena.harness.session import as_outputs

    cpu = problem.spec.workloads_for("cpu")
    if not cpu:
        return
    workload = min(cpu, key=lambda w: _elements(definition, w.axes))
    generator = torch.Generator(device="cpu").manual_seed(0)
    where = problem.path / REFERENCE_FILE
    try:
        inputs = problem.make_inputs(dict(workload.axes), workload.torch_dtype, torch.device("cpu"), generator)
        with torch.no_grad():
            outs = as_outputs(problem.reference(**inputs))
    except GpuarenaError:
        raise
    except Exception as exc:  # the reference's own failure, shown as it is
        raise FormatError(
            where,
            "reference",
            f"running it on workload {workload.name} failed: {type(exc).__name__}: {exc}",
            "fix the definition's reference",
        ) from None
    if len(outs) != len(definition.outputs):
        raise FormatError(
            where,
            "reference",
            f"run() returned {len(outs)} outputs; the definition has "
            f"{len(definition.outputs)} ({', '.join(definition.outputs)})",
            "fix the definition",
        )
    for (name, spec), out in zip(definition.outputs.items(), outs):
        shape = [workload.axes[a] for a in spec.shape or []]
        if not isinstance(out, torch.Tensor) or list(out.shape) != shape or out.dtype != getattr(torch, spec.dtype):
            got = (
                f"{list(out.shape)} {str(out.dtype).removeprefix('torch.')}"
                if isinstance(out, torch.Tensor)
                else type(out).__name__
            )
            raise FormatError(
                where,
                "reference",
                f"output {name} of run() on workload {workload.name} is {got}; "
                f"the definition says {shape} {spec.dtype}",
                "fix the definition or its reference",
            )


def _write_folder(files: dict[str, str], out_dir: Path, force: bool) -> Path:
    """Write into a fresh folder beside out_dir, then put it in place."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise GpuarenaError(f"{out_dir} exists and is not empty (--force replaces it)")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    for name, text in files.items():
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return staging


def _put_in_place(staging: Path, out_dir: Path) -> Path:
    if out_dir.exists():
        shutil.rmtree(out_dir)
    staging.rename(out_dir)
    return out_dir


def import_definition(
    definition_path: Path | str,
    workloads_path: Path | str,
    out_dir: Path | str,
    *,
    convention: str = "destination",
    level: int | None = None,
    force: bool = False,
    verify: bool = True,
    check_device: str | None = "cpu",
    keep_failing: bool = False,
    dataset_root: Path | str | None = None,
) -> ImportResult:
    """Read a Definition JSON and its workloads JSONL; write the gpuarena problem folder out_dir.
    With verify, the reference runs once on the smallest CPU workload to confirm it returns the
    definition's output shapes and dtypes. Then `gpuarena check` runs on check_device (None: not
    at all), as the other importers run it: a problem it fails is not written (FlashInferCheckFailed,
    with its findings) unless keep_failing, which writes it and gives the findings as notes.
    Safetensors inputs are read from their files now (relative paths: under dataset_root, else the
    data set's root found from the workloads file's place, else its folder: dataset_roots)."""
    definition = read_definition(definition_path)
    workloads = read_workloads(workloads_path, definition=definition.name)
    files, notes = problem_files(
        definition,
        workloads,
        convention=convention,
        level=level,
        definition_path=str(definition_path),
        workloads_path=str(workloads_path),
        roots=dataset_roots(workloads_path, dataset_root),
    )
    out_dir = Path(out_dir)
    staging = _write_folder(files, out_dir, force)
    try:
        load_spec(staging)
        if verify:
            problem = load_problem(staging)
            try:
                _verify(problem, definition)
            finally:
                if problem._module is not None:  # imported from the staging folder: forget it
                    sys.modules.pop(problem._module.__name__, None)
        findings = _checked(staging, out_dir, check_device)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if findings and not keep_failing:
        shutil.rmtree(staging, ignore_errors=True)
        raise FlashInferCheckFailed(definition_path, findings)
    return ImportResult(_put_in_place(staging, out_dir), notes + findings)


class FlashInferCheckFailed(GpuarenaError):
    """`gpuarena check` failed the imported problem: nothing was written."""

    def __init__(self, definition_path: Path | str, findings: list[str]):
        self.findings = findings
        super().__init__(
            f"{definition_path}: not imported; `gpuarena check` says:\n  "
            + "\n  ".join(findings)
            + "\n(fix: the definition or its workloads; --keep-failing writes it anyway)"
        )


def _checked(staging: Path, out_dir: Path, check_device: str | None) -> list[str]:
    """What `gpuarena check` finds wrong with the staged problem on check_device ([] where it
    passes or was not asked for), named by the folder it will be written to. A problem with no
    workload for that device is checked where it can run, and says so."""
    if check_device is None:
        return []
    from gpuarena.harness.problem_check import check_problem

    spec = load_spec(staging)
    kind = check_device.split(":")[0]
    if not any(kind in w.devices for w in spec.workloads):  # problem_files noted it (no CPU-sized workload)
        mark_unchecked(staging, devices_not_checked(staging, check_device))  # its first GPU run checks it
        return []
    try:
        report = check_problem(staging, device=check_device)
    finally:
        sys.modules.pop(f"gpuarena_reference_{abs(hash(str(staging.resolve() / REFERENCE_FILE)))}", None)
    return [m.replace(str(staging), str(out_dir)).replace(staging.name, out_dir.name) for m in report.errors]


# -- solutions -------------------------------------------------------------------------------


def solution_files(solution: Solution, problem: Problem, where: str = "solution") -> dict[str, str]:
    """The files of the gpuarena solution folder for a FlashInfer Solution, for this problem."""
    sidecar = read_problem_sidecar(problem.path)
    if sidecar is not None and solution.definition != sidecar.definition.name:
        raise FormatError(
            where,
            "definition",
            f"names {solution.definition!r}, but {problem.id} was imported from {sidecar.definition.name!r}",
            "import it for the problem of its definition",
        )
    spec = solution.spec
    language = gpuarena_language(spec.language, spec.binding)
    if language is None:
        raise UnsupportedFeature(
            where,
            f"{spec.language} solutions" + (f" bound with {spec.binding}" if spec.binding else ""),
            "gpuarena builds python, triton, tilelang, cuda (tvm-ffi or torch binding) and cpp (tvm-ffi) solutions",
        )
    compiled = language in COMPILED_LANGUAGES
    if not compiled and not spec.entry_file.endswith(".py"):
        raise FormatError(
            where,
            "spec.entry_point",
            f"names {spec.entry_file!r}, not a .py file",
            "a python, triton or tilelang entry point is a function in a .py file",
        )
    for source in solution.sources:
        if why := unsafe_source_name(source.path):
            raise FormatError(where, "sources", f"path {source.path!r} {why}", "rename the file")
        if source.path in (MANIFEST_FILE, SIDECAR, ADAPTER_FILE):
            raise FormatError(
                where, "sources", f"path {source.path!r} is a name gpuarena's solution folder uses", "rename the file"
            )
    files = {s.path: s.content for s in solution.sources}
    entry = spec.entry_function if compiled else f"{spec.entry_file}:{spec.entry_function}"
    own = "destination" if spec.destination_passing_style else "return"
    manifest = [
        f"# Imported from the FlashInfer-Trace solution {_toml_str(solution.name)} by `gpuarena import flashinfer-solution`.",
        f"language = {_toml_str(language)}",
        f"entry_point = {_toml_str(entry)}",
        f"sources = {_toml_list(list(files))}",
    ]
    if own != problem.spec.convention:  # called as it was written (solutions/model.py: convention)
        manifest.append(f"convention = {_toml_str(own)}")
    meta = SolutionSidecar(solution=solution.model_dump(mode="json", exclude={"sources"}))
    return {**files, MANIFEST_FILE: "\n".join(manifest) + "\n", SIDECAR: meta.model_dump_json(indent=2) + "\n"}


def import_solution(solution_path: Path | str, problem: Problem, out_dir: Path | str, *, force: bool = False) -> Path:
    """Read a FlashInfer Solution JSON; write a gpuarena solution folder that `gpuarena run`
    accepts for this problem."""
    solution = read_solution(solution_path)
    files = solution_files(solution, problem, str(solution_path))
    out_dir = Path(out_dir)
    staging = _write_folder(files, out_dir, force)
    try:
        load_solution(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _put_in_place(staging, out_dir)
