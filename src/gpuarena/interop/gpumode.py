"""GPU MODE into gpuarena: `gpuarena import gpumode PATH... -o DIR`.

A GPU MODE problem folder (gpu-mode/reference-kernels, problems/GROUP/NAME/) holds `task.yml`
(its `tests` and `benchmarks`: lists of keyword arguments of `generate_input`, each with a
`seed`; time-outs; the files the eval puts beside the submission, `utils.py` among them),
`reference.py` (`generate_input(**args, seed)` -> `data`, `ref_kernel(data)` -> the expected
output, `check_implementation(data, output)` -> '' or (ok, message)) and `task.py` (the types
`input_t`, `output_t`). A submission defines `custom_kernel(data)`.

The choices:

- Names. A folder becomes OUT/levelN/NAME, NAME its folder's name; folders imported together
  under the same name (problems/pmpp/sort_py, problems/pmpp_v2/sort_py) get the names of as
  many folders above as tell them apart before it (pmpp_sort_py, pmpp_v2_sort_py), which their
  outcomes say (problem_names).
- Workloads. Every entry of `tests` and `benchmarks` becomes a workload (`test0-size1024`,
  `bench0-size4096`, `test1-shape128x256`: names from the entry's arguments), in that order. Its
  axes are the entry's integer arguments plus `case`, the entry's index in a table in the glue
  that keeps every argument (floats, strings and lists of them included, which axes cannot
  hold; generate_input gets them as task.yml gives them). GPU MODE checks its
  tests and times its benchmarks, and so does gpuarena: test workloads say `timed = false`
  (judged for correctness only, in every mode), so a score is the benchmarks'. A
  workload runs on the CPU when its data could be made on the CPU at import and holds at most
  CPU_MAX_ELEMENTS elements; else on CUDA only. task.yml's time-outs become time_limits.
- Seeds. The supervisor keeps control of the seed: make_inputs() draws the `seed` it passes
  to `generate_input` from the harness's generator, so inputs are fresh and secret in every
  draw, ranked runs included. It is drawn in the range of GPU MODE's own seeds (below 2**16, or
  the power of two above task.yml's largest seed: gpumode_write.SEED_BOUND), as generate_input
  may use it as data (GPU MODE's sort adds it to float32 normals: a seed near 2**31 makes
  them constant). The
  entries' own seeds are GPU MODE's fixed test inputs: the importer uses them once, to make
  the data it probes and to run the task's own `check_implementation` on the reference's
  output; they are kept in the table for the record and never used in a run. GPU MODE's eval.py
  also calls `set_seed(POPCORN_SEED or 42)` (Python's, NumPy's and torch's global generators)
  before its tests, and a task may draw from those (bioml/trimul's weights): make_inputs()
  seeds them around generate_input with a second seed drawn from the harness's generator, and
  puts their state back after; the probe seeds them with 42 (gpumode_device.SEEDED says why
  not GPU MODE's exact draws: its spawned worker never saw set_seed).
- Several GPUs. A task that needs them (`multi_gpu: true` in task.yml, a generate_input that
  takes the process's `rank`, a reference.py that uses torch.distributed: GPU MODE's
  amd_distributed tasks) is refused before any of its code runs, saying so.
- Packages. The third-party packages the task's files import at module level (AMD's `aiter`)
  are the problem's `requires` in problem.toml, so check and run name one wherever it is
  missing. A task whose package is not installed here is refused before any of it runs, naming
  it (gpumode_needs.py: nothing true can be written without running it).
- CUDA only. A ref_kernel that
  fails on the CPU on data made there (a `.cuda()`, an op with no CPU kernel: nvfp4's
  torch._scaled_mm) is run on the meta device for its outputs and the buffers it writes
  (gpumode_gpu.py); its workloads run on CUDA only, and the import, not checked, fails on the
  CPU saying so (written with --keep-failing, for `gpuarena check --device cuda`), as does a
  task whose every entry is GPU-sized.
- Inputs. `data` (a tensor, or tuples, lists, string-keyed dicts, dataclasses, namedtuples
  and SimpleNamespaces of tensors and numbers) is flattened: each tensor is one named input of reference() (names from the first line of
  ref_kernel that unpacks `data`, `a, b, c = data`, else data0, data1, ...), and the last
  input, `gpumode_data` = (format, layout, output layout), a plain tuple that is the same in
  every draw of a workload (the supervisor refuses one that changes), says how to rebuild
  `data` exactly: numbers, strings and None in data travel inside it, and so do the field names
  of a dataclass (mla-decode's Config), rebuilt with the task's own class in the glue and, in
  the adapter, which has no task files, with a dataclass of the same name and fields. One with
  methods of its own, or any other object (an nn.Module: mla-decode's KVCache), cannot be
  rebuilt there and is refused, naming it. An input that is one value everywhere in the
  probe's two draws of an entry (trimul's mask of ones where it says nomask) is a constant of
  that workload: it travels as (CONSTANT, shape, dtype, value) in place of the tensor and is
  made on every call, like a buffer, so no check calls it degenerate; in an entry the probe
  could not run, an input of at least DYNAMIC_CONSTANT elements that is one value is one. A tensor that
  ref_kernel writes into, or one it ignores that holds as many elements as one of its outputs
  (GPU MODE's `output = torch.empty(...)` in data, replaced by ref_kernel's own), is an output
  buffer: it is not an input (a solution writing into
  its input is refused, and a check needs inputs that matter) but a buffer leaf of the layout,
  made afresh on every call by the glue and by the adapter, zeroed where generate_input
  zeroed it. Any other tensor ref_kernel ignores stays an input with its values (nvfp4's
  rearranged scale factors, which submissions read), and the glue's unread_inputs() names it,
  seen unread in a recorded run of ref_kernel (gpumode_reads.py), so the check does not call
  the problem degenerate for it. The adapter (interop/gpumode_solution.py, added to a one-file solution defining
  `custom_kernel` and no `solve`) hands custom_kernel the same structure it expects.
- Outputs. What ref_kernel returns (a tensor, a Python number, or tuples and lists of them)
  becomes the problem's outputs, one per tensor, in order (`output`, or `output0`, ...); a
  number becomes a 0-dim tensor (int64, float64 or bool) on both sides. Integer and boolean
  outputs are compared exactly by the harness, whatever the tolerance.
- Checking. Where `check_implementation` is closeness to ref_kernel's output, it is mapped
  onto gpuarena tolerances, read from its source: `make_match_reference(ref_kernel, rtol=,
  atol=)` and `verbose_allclose(..., rtol=, atol=)` (GPU MODE's defaults 1e-5 and 1e-8 where
  not given) give atol and rtol; `verbose_allequal` and `torch.equal` give exact comparison.
  l2 (gpuarena's bound on the relative L2 error, which GPU MODE does not have) is gpuarena's
  default for the dtype, raised to rtol where that is looser. Every workload dtype of the
  problem gets that tolerance. A checker that cannot be read so (its own logic, several
  tolerances: one that accepts answers other than the reference's, any valid order or tie)
  becomes the problem's checker (ProblemSpec.checker): the glue's `check()` rebuilds `data`
  and the output in ref_kernel's shape and calls the task's check_implementation, in the
  supervisor, on every checked output. `--atol/--rtol` (or `--exact`) judge by closeness to
  ref_kernel's output instead (stricter than such a checker, never looser), which the README
  of the problem says. Either way, the importer runs the task's own check_implementation once
  on ref_kernel's output for the first probed entry (its own seed): one that rejects the
  reference's own output is an error.

The problem folder holds
- `reference.py`: the glue (generated; reference() and make_inputs());
- `gpumode/`: the task's files verbatim (task.yml, reference.py, task.py, and the utils.py
  task.yml names, or the folder's or its parent's; where none is found, GPU_MODE_UTILS, the
  checking helpers GPU MODE's utils.py defines, written by gpuarena). The glue runs them with
  `task` and `utils` in sys.modules for the time of their import only, and reference.py as a
  module of its own in sys.modules (a @dataclass looks its module up there);
- `problem.toml` and `README.md`.

Every problem is checked with `gpuarena check` before it is put in place; one that fails is
reported with the check's findings and not written, unless asked (--keep-failing).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuarena.errors import GpuarenaError
from gpuarena.interop.gpumode_gpu import (
    META_PROBED,
    beyond_this_gpu,
    gpu_only_finding,
    meta_probe,
    needs_another_gpu,
    own_output_verdict,
)
from gpuarena.interop.gpumode_parts import LayoutsDiffer, import_parts
from gpuarena.interop.gpumode_probe import (
    _clone,
    _generate,
    _input_names,
    _ref,
    _runtime,
    _shape_of,
    find_buffers,
    find_constants,
    probed,
)
from gpuarena.interop.gpumode_reads import unread, unread_names
from gpuarena.interop.gpumode_task import (
    GPU_MODE_UTILS,
    GPUMODE_DEFAULT,
    Case,
    GpuModeError,
    Rule,
    Task,
    _verdict,
    checking_rule,
    load_namespace,
    read_task,
    read_task_yml,
)
from gpuarena.interop.gpumode_write import (
    CHECK_GLUE,
    SEED_BOUND,
    _glue,
    _problem_toml,
    _readme,
    _write_staging,
    problem_name,
)
from gpuarena.interop.outcome import Outcome
from gpuarena.interop.unchecked import devices_not_checked, mark_unchecked

# The public names, importable from here as before the split (gpumode_task, _probe and _write).
__all__ = [
    "CHECK_GLUE",
    "CPU_MAX_ELEMENTS",
    "GPUMODE_DEFAULT",
    "GPU_MODE_UTILS",
    "SEED_BOUND",
    "Case",
    "GpuModeError",
    "Rule",
    "Task",
    "checking_rule",
    "find_buffers",
    "gpumode_folders",
    "import_folder",
    "import_folders",
    "load_namespace",
    "problem_name",
    "problem_names",
    "read_task",
    "read_task_yml",
]

CPU_MAX_ELEMENTS = 1 << 22
"""A workload whose data and outputs hold at most this many elements runs on the CPU."""


def import_folder(
    folder: Path | str,
    out_root: Path | str,
    *,
    level: int = 1,
    atol: float | None = None,
    rtol: float | None = None,
    exact: bool = False,
    force: bool = False,
    keep_failing: bool = False,
    check_device: str = "cpu",
    name: str | None = None,
    cases: list[int] | None = None,
) -> Outcome:
    """One GPU MODE problem folder as the problem folder OUT_ROOT/levelN/NAME (NAME: the
    folder's name unless given), checked with `gpuarena check` first; a folder whose entries
    make data of several layouts as one problem each (gpumode_parts). `cases`: only these of
    its entries (in task.yml's order, tests first). Never raises for the folder's own faults:
    the Outcome says them."""
    folder = Path(folder)
    try:
        return _import_folder(
            folder, Path(out_root), level, atol, rtol, exact, force, keep_failing, check_device, name, cases
        )
    except LayoutsDiffer as differ:

        def one(group: list[int], part: str) -> Outcome:
            chosen = [cases[i] for i in group] if cases is not None else group
            return import_folder(
                folder, out_root, level=level, atol=atol, rtol=rtol, exact=exact, force=force,
                keep_failing=keep_failing, check_device=check_device, name=part, cases=chosen,
            )  # fmt: skip

        return import_parts(folder, name or problem_name(folder), differ.groups, one)
    except GpuarenaError as exc:
        return Outcome(folder, "error", messages=[str(exc)])


def _import_folder(
    folder: Path,
    out_root: Path,
    level: int,
    atol: float | None,
    rtol: float | None,
    exact: bool,
    force: bool,
    keep_failing: bool,
    check_device: str,
    given_name: str | None,
    cases: list[int] | None,
) -> Outcome:
    import dataclasses

    import torch

    from gpuarena.harness.problem_check import CheckReport, check_problem

    if not 1 <= level <= 4:
        raise GpuModeError(folder, f"level {level} is not one of gpuarena's levels 1-4", "give --level 1-4")
    task = read_task(folder)
    if cases is not None:
        task = dataclasses.replace(task, cases=[task.cases[i] for i in cases])
    reference = folder / "reference.py"
    if exact or atol is not None or rtol is not None:
        if exact and (atol or rtol):
            raise GpuModeError(folder, "--exact with a non-zero --atol or --rtol")
        rule = Rule(
            atol or 0.0,
            rtol or 0.0,
            exact or not (atol or rtol),
            f"atol={atol or 0:g}, rtol={rtol or 0:g} given to the importer, judged by closeness to "
            "ref_kernel's output in place of the task's check_implementation",
            from_task=False,
        )
        how = checking_rule(task.sources["reference.py"], reference).how + "; overridden: " + rule.how
    else:
        rule = checking_rule(task.sources["reference.py"], reference)
        how = rule.how
    rt = _runtime(check_device, task.namespace)
    notes: list[str] = []
    unprobed: dict[str, list[str]] = {}
    """generate_input's error -> the entries it stopped (said once, not once an entry)."""
    probes: dict[int, tuple[int, str, dict[int, Any]]] = {}  # gpumode_probe.probed: not the tensors
    buffers: dict[int, str] | None = None
    spec: tuple[Any, ...] | None = None
    first_layout: tuple[Any, ...] | None = None
    layouts: dict[Any, list[int]] = {}  # each structure of data -> its entries: a problem each (gpumode_parts)
    first: tuple[Any, Any] = (None, None)
    device = torch.device(check_device)
    cpu_failure = ""
    """ref_kernel's error on the CPU, where it needs CUDA: entries then probed on meta (gpumode_gpu.py)."""
    gpu_only: set[int] = set()
    reads: dict[int, set[int] | None] = {}
    """Entry -> the tensors of its data ref_kernel never reads (gpumode_reads.py)."""
    for index, case in enumerate(task.cases):
        data = tensors = out = None  # the last entry's go before this one is drawn (trimul's are 3.2 GB)
        try:
            data = _generate(task, case, case.seed, rt)
            tensors, layout = rt["flatten"](data)
        except TypeError as exc:
            raise GpuModeError(reference, f"generate_input(**{case.name}): {exc}") from None
        except Exception as exc:  # e.g. a torch.cuda call on a machine without a GPU
            unprobed.setdefault(f"{type(exc).__name__}: {exc}", []).append(case.name)
            continue
        signature = (_shape_of(layout), len(tensors))
        layouts.setdefault(signature, []).append(index)
        if signature != next(iter(layouts)):  # another layout: a problem of its own (gpumode_parts)
            continue
        tensors = [t.to(device) for t in tensors]
        data = rt["rebuild"](layout, tensors, device)
        elements = sum(t.numel() for t in tensors)
        if elements > CPU_MAX_ELEMENTS and probes:
            probes[index] = probed(tensors, buffers or {}, rt)
            continue
        try:
            if cpu_failure:
                raise RuntimeError(cpu_failure)
            out = _ref(task, data)
            case_spec = rt["output_spec"](out)
        except TypeError as exc:
            raise GpuModeError(reference, f"ref_kernel on {case.name}: {exc}") from None
        except Exception as exc:
            error = cpu_failure or f"{type(exc).__name__}: {exc}"
            if device.type != "cpu" and not beyond_this_gpu(error):
                raise GpuModeError(reference, f"ref_kernel on {case.name} raised {error}") from None
            try:
                out, meta_buffers = meta_probe(task, data, rt)
                case_spec = rt["output_spec"](out)
            except Exception as meta_exc:
                raise GpuModeError(
                    reference,
                    f"ref_kernel on {case.name} raised {error} on the CPU, and "
                    f"{type(meta_exc).__name__}: {meta_exc} on the meta device",
                    "import on a machine with a GPU (--check-device cuda)",
                ) from None
            cpu_failure = error
            gpu_only.add(index)
        if spec is None and cpu_failure:  # CUDA only: shapes from meta, values left to a GPU
            spec, first_layout, first, buffers = case_spec, layout, (data, out), meta_buffers
        elif spec is None:
            spec, first_layout, first = case_spec, layout, (data, out)
            reads[index] = unread(task, data, rt, meta=False)
            buffers = find_buffers(task, case, data, rt, reads[index])
            ok, message = own_output_verdict(task, data, out, elements > CPU_MAX_ELEMENTS, notes, case.name)
            if not ok:
                raise GpuModeError(
                    reference,
                    f"check_implementation rejects ref_kernel's own output on {case.name} "
                    f"(seed {case.seed}): {message.strip()[:300]}",
                )
            if spec == ("t",) and bool(out.any()):
                try:
                    accepted, _ = _verdict(task.namespace["check_implementation"](_clone(data), torch.zeros_like(out)))
                except Exception:  # a checker that fails on zeros rejects them
                    accepted = False
                if accepted:
                    notes.append(f"check_implementation accepts zeros on {case.name}; gpuarena check decides")
        elif case_spec != spec:
            raise GpuModeError(
                reference,
                f"ref_kernel returns {case_spec} on {case.name} but {spec} on the first "
                "entry; gpuarena needs the same outputs for every workload",
            )
        if index not in reads:
            reads[index] = unread(task, data, rt, meta=index in gpu_only)
        probes[index] = probed(tensors, buffers or {}, rt)
    if len(layouts) > 1:
        raise LayoutsDiffer(list(layouts.values()), len(task.cases))
    notes += [
        f"{', '.join(names)}: generate_input raised {error}; CUDA only, not probed" for error, names in unprobed.items()
    ]
    if spec is None or buffers is None or first_layout is None:
        raise GpuModeError(
            reference,
            "no entry of tests or benchmarks could be run here: " + "; ".join(notes),
            "import on a machine with a GPU (--check-device cuda)",
        )
    data = tensors = out = None  # the last entry's go before find_constants draws again
    constants = {index: find_constants(task, task.cases[index], p[2], buffers, rt) for index, p in probes.items()}
    _, stored = rt["flatten"](first[0], buffers)
    names = _input_names(task, stored)
    unread_inputs = {index: unread_names(found, buffers, names) for index, found in reads.items()}
    n_outputs = len(rt["outputs"](first[1], spec, device))
    outputs = ["output"] if n_outputs == 1 else [f"output{i}" for i in range(n_outputs)]
    dtypes_seen = [p[1] for p in probes.values()]
    fallback = max(set(dtypes_seen), key=dtypes_seen.count)
    workloads = []
    for index, case in enumerate(task.cases):
        axes = {"case": index, **{k: v for k, v in case.args.items() if type(v) is int and k != "case"}}
        if index in probes:
            elements, dtype, _ = probes[index]
            on_cpu = device.type == "cpu" and elements <= CPU_MAX_ELEMENTS and index not in gpu_only
        else:
            on_cpu, dtype = False, fallback
        workloads.append((case, axes, dtype, ["cpu", "cuda"] if on_cpu else ["cuda"]))
    name = given_name or problem_name(folder)
    files = {
        "problem.toml": _problem_toml(task, name, level, outputs, rule, workloads, how),
        "reference.py": _glue(names, task.cases, buffers, spec, constants, unread_inputs)
        + (CHECK_GLUE if rule.checker else ""),
        "README.md": _readme(task, name, how, names, workloads),
        "gpumode/task.yml": task.sources["task.yml"],
        "gpumode/reference.py": task.sources["reference.py"],
        "gpumode/task.py": task.sources["task.py"],
        "gpumode/utils.py": task.sources["utils.py"],
    }
    if task.utils_from == "gpuarena":
        notes.append(
            "no utils.py beside the task or named in task.yml: gpumode/utils.py is gpuarena's copy of GPU "
            "MODE's checking helpers"
        )
    out_dir = out_root / f"level{level}" / name
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise GpuModeError(folder, f"{out_dir} exists and is not empty", "--force replaces it")
    staging = _write_staging(files, out_dir)
    beyond = device.type != "cpu" and bool(cpu_failure)  # this GPU cannot run ref_kernel: not checked here
    try:
        report = CheckReport(name) if beyond else check_problem(staging, device=check_device)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        sys.modules.pop(f"gpuarena_reference_{abs(hash(str(staging.resolve() / 'reference.py')))}", None)
    findings = [m.replace(str(staging), str(out_dir)).replace(staging.name, name) for m in report.errors]
    if beyond:  # written for a GPU that can run it, which checks it first
        mark_unchecked(staging, ["cuda"])
        notes.insert(0, needs_another_gpu(cpu_failure, device, out_dir))
    if device.type == "cpu" and not any("cpu" in w[3] for w in workloads):  # not "no workload on the CPU"
        why = f"ref_kernel raised {cpu_failure} on the CPU" if cpu_failure else "no entry's data is CPU-sized"
        findings = [f for f in findings if "no workload runs on the CPU" not in f]
        mark_unchecked(staging, devices_not_checked(staging, check_device))  # its first GPU run checks it
        notes.insert(0, gpu_only_finding(why, out_dir))
        notes += [META_PROBED] if cpu_failure else []
    outcome = Outcome(
        folder,
        "failed-check" if findings else "imported",
        problem_id=f"level{level}/{name}",
        messages=notes + findings,
        workloads=[w[0].name for w in workloads],
    )
    if not findings or keep_failing:
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
        outcome.folder = out_dir
    else:
        shutil.rmtree(staging, ignore_errors=True)
    return outcome


def gpumode_folders(paths: list[Path]) -> list[Path]:
    """The task folders named (those holding task.yml), and those right under a folder named
    that holds none itself (a GPU MODE group such as problems/pmpp); each folder once."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not (path / "task.yml").exists():
            inner = sorted(p.parent for p in path.glob("*/task.yml"))
            found += inner or [path]
        else:
            found.append(path)
    unique: dict[Path, Path] = {}
    for folder in found:
        unique.setdefault(folder.resolve(), folder)
    return list(unique.values())


def problem_names(folders: list[Path]) -> dict[Path, str]:
    """Each folder's problem name: its own name (problem_name), or, where two folders imported
    together have the same name (problems/pmpp/sort_py and problems/pmpp_v2/sort_py), that name
    after the names of as many folders above as tell them apart (pmpp_sort_py, pmpp_v2_sort_py)."""
    names = {folder: problem_name(folder) for folder in folders}

    def clashing() -> list[list[Path]]:
        groups: dict[str, list[Path]] = {}
        for folder, name in names.items():
            groups.setdefault(name, []).append(folder)
        return [group for group in groups.values() if len(group) > 1]

    depth = 0
    while (groups := clashing()) and depth < max((len(f.resolve().parents) for f in folders), default=0):
        depth += 1
        for group in groups:
            for folder in group:
                above = [problem_name(p) for p in folder.resolve().parents[:depth] if p.name][::-1]
                names[folder] = "_".join([*above, problem_name(folder)])
    for group in clashing():  # names that only differ in characters a name cannot hold
        for i, folder in enumerate(group[1:], start=2):
            names[folder] = f"{names[folder]}_{i}"
    return names


def import_folders(paths: Sequence[Path | str], out_root: Path | str, **options: Any) -> list[Outcome]:
    """Every GPU MODE folder among paths imported under out_root; one folder's fault stops no
    other. Folders of the same name are told apart by the folders above them (problem_names),
    which each one's outcome says."""
    folders = gpumode_folders([Path(p) for p in paths])
    names = problem_names(folders)
    outcomes = []
    for folder in folders:
        outcome = import_folder(folder, out_root, name=names[folder], **options)
        if names[folder] != problem_name(folder):
            others = [str(f) for f in folders if f != folder and problem_name(f) == problem_name(folder)]
            outcome.messages.insert(
                0,
                f"named {names[folder]}, not {problem_name(folder)}: so is the folder "
                + ", ".join(others)
                + " imported with it",
            )
        outcomes += outcome.parts or [outcome]  # a task of several layouts: a problem each
    return outcomes
