"""KernelBench into gpuarena: `gpuarena import kernelbench PATH... -o DIR`.

A KernelBench problem file defines `Model(nn.Module)` (its `forward` is the operator),
`get_inputs()` (random inputs at the file's sizes) and `get_init_inputs()` (the arguments of
`Model(...)`), with the sizes as top-level integer constants. KernelBench's eval seeds torch
(42) before building `Model` and again before building the solution's `ModelNew`, so the two
get the same parameters when they create them in the same order.

The choice: module state is made once per workload, on each side, from the same seed and
init values, and both travel as one plain input. An imported problem's `reference()` takes
forward's inputs plus a last scalar input, `kernelbench_init` = (format, seed, args (the
values of get_init_inputs()), sizes, dtype), a plain tuple. make_inputs() draws the forward inputs by
running get_inputs() with torch seeded from the harness's generator (so they are fresh and
secret per draw, as every input) and adds that init value, which is the same in every draw of
a workload (the supervisor refuses a scalar input that changes). The supervisor's reference
builds `Model(*args)` under `torch.manual_seed(seed)` on the CPU once per workload, as
KernelBench does, and keeps it; the worker's adapter (interop/kernelbench_solution.py, added
to any one-file solution defining `ModelNew` and no `solve`) builds `ModelNew(*args)` the same
way, once, and calls it. The problem format needs no extension: a scalar input is what it
already allows, and nothing the harness checks changes. The parameters are not secret (the
solution makes them itself, as in KernelBench); the inputs are.

The problem folder holds
- `reference.py`: the KernelBench file verbatim, a marker line, then the glue. The glue runs
  the file's text again with a workload's sizes put in place of its top-level integer
  constants (`batch_size = 16`, `dim = 16384 // 4`, `a = b = 256`, the elements of
  `kernel_size = (3, 5)`: kernelbench_read.size_constants reads them, substitute_sizes, whose
  source the glue holds, puts them in place), so every size follows, constants computed from
  them (`M = 4 * N`) included;
- `problem.toml`: the file's own sizes as the workload `kernelbench` (GPU only when large),
  plus `cpu-small`, the sizes halved (the largest first, constants under 16 kept: kernel
  sizes, strides, dims) until inputs and outputs hold at most CPU_MAX_ELEMENTS elements and
  parameters at most CPU_MAX_PARAMETERS, where the shapes allow it (found on the meta device,
  then run once on the CPU); the file's own sizes run on the CPU too where they are under both;
  KernelBench's tolerance for the dtype;
- `README.md`.

Every problem is checked with `gpuarena check` before it is put in place; one that fails
(a constant or near-zero output, an ignored input, a nondeterministic forward, no CPU
workload when checked on the CPU) is reported with the check's findings and not written,
unless asked. The problem is written to a staging folder beside its place
(`.NAME.gpuarena-PID-...`), checked there and renamed into place; a folder it replaces is
renamed aside first and deleted after. An import killed part way leaves the problem folder
whole (old, new or absent), and the next import removes the staging folders whose process is
gone.
"""

from __future__ import annotations

import inspect
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuarena.errors import GpuarenaError
from gpuarena.interop import staging as staging_folders
from gpuarena.interop.kernelbench_hf import PROLOGUE, HubModel, glue_block
from gpuarena.interop.kernelbench_read import (  # noqa: F401  re-exported: tests and callers import them from here
    CPU_MAX_ELEMENTS,
    CPU_MAX_PARAMETERS,
    MARKER,
    MIN_SHRINK,
    SEED,
    KernelBenchError,
    _File,
    _input_elements,
    _names_from_forward,
    _Probe,
    _probe,
    read_file,
    size_constants,
    substitute_sizes,
    uses_transformers,
    with_sizes,
)
from gpuarena.interop.kernelbench_small import small_inputs, small_sizes
from gpuarena.interop.kernelbench_solution import INIT_FORMAT, INIT_INPUT
from gpuarena.interop.kernelbench_write import TOLERANCE, Workloads, problem_toml, readme
from gpuarena.interop.outcome import Outcome
from gpuarena.interop.unchecked import devices_not_checked, mark_unchecked

HEADER = "# gpuarena: the KernelBench problem file, verbatim, down to the marker line below."

# -- writing the problem ------------------------------------------------------------------------


def problem_name(path: Path) -> str:
    name = re.sub(r"[^a-z0-9_\-]+", "_", path.stem.lower()).strip("_-")
    return name or "kernelbench_problem"


def level_of(path: Path, level: int | None) -> int:
    if level is not None:
        return level
    for part in reversed(path.resolve().parts[:-1]):
        found = re.fullmatch(r"level_?(\d+)", part.lower())
        if found:
            number = int(found.group(1))
            if not 1 <= number <= 4:
                raise KernelBenchError(
                    path, f"is in a level {number} folder; gpuarena's levels are 1-4", "give --level 1-4"
                )
            return number
    return 1


def _substitution_source() -> str:
    """substitute_sizes's own source as the glue's _substitute_sizes: the sizes are put in
    place in the problem as they were when the import read and probed the file."""
    source = inspect.getsource(substitute_sizes)
    return source.replace("def substitute_sizes(", "def _substitute_sizes(", 1)


def _glue(input_names: list[str], hub: dict[str, HubModel] | None = None) -> str:
    """hub: the Hugging Face models the file builds (None: it uses no transformers)."""
    params = ", ".join([*input_names, INIT_INPUT])
    return f'''{MARKER}
# gpuarena glue, written by `gpuarena import kernelbench` (gpuarena/interop/kernelbench.py).
# reference() is Model's forward. The model is built as KernelBench's eval builds it
# (torch.manual_seed(seed), Model(*get_init_inputs()), then .to(device, dtype)), once per
# workload, from the last input; make_inputs() runs get_inputs() with torch seeded from the
# harness's generator. The file above runs again with each workload's sizes put in place of
# its top-level integer constants (_substitute_sizes); constants computed from them follow.
import ast as _ast
import copy as _copy
from pathlib import Path as _Path

import torch as _torch

_SEED = {SEED}
_INPUTS = {input_names!r}
_INIT_FORMAT = {INIT_FORMAT!r}
_MARKER = {MARKER!r}
_namespaces = {{}}
_models = {{}}

{glue_block(hub)}


{_substitution_source()}

def _namespace(sizes):
    key = tuple(sorted(sizes.items()))
    if key not in _namespaces:
        text = _Path(__file__).read_text(encoding="utf-8").split("\\n" + _MARKER + "\\n", 1)[0]
        text = text.replace(_PROLOGUE, "", 1) if _PROLOGUE else text  # run under _offline_hub below
        tree = _substitute_sizes(_ast.parse(text), sizes)
        namespace = {{"__name__": "kernelbench_problem", "__file__": __file__}}
        with _offline_hub(sizes):
            exec(compile(tree, __file__, "exec"), namespace)
        _namespaces[key] = namespace
    return _namespaces[key]


def _forked(device):  # manual_seed reseeds the GPU's generator too: a seeded call's draws keep theirs
    return _torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def _init(sizes, dtype, device):
    """(format, seed, init args, sizes, dtype): a plain tuple, the same in every draw."""
    with _forked(device):
        _torch.manual_seed(_SEED)
        args = _encode_init(_namespace(sizes)["get_init_inputs"]())
    return (_INIT_FORMAT, _SEED, args, tuple(sorted(sizes.items())), str(dtype).removeprefix("torch."))


def _model(init, device, dtype):
    key = (repr(init), str(device), str(dtype))  # init args may hold lists (ResNet's), which do not hash
    if key not in _models:
        _, seed, args, sizes, _ = init
        # built under the seed as KernelBench builds it, afresh for each device and dtype, never a copy:
        # a copy's forward may call the original through a closure (44_MiniGPTBlock's `mlpf` lambda)
        with _forked(device), _torch.no_grad(), _offline_hub(dict(sizes)):
            _torch.manual_seed(seed)
            model = _namespace(dict(sizes))["Model"](*_decode_init(_copy.deepcopy(args)))
        _models[key] = model.to(device=device, dtype=dtype)
    return _models[key]


def reference({params}):
    inputs = [{", ".join(input_names)}]
    init = {INIT_INPUT}
    tensors = [t for t in inputs if isinstance(t, _torch.Tensor)]
    floating = [t for t in tensors if t.is_floating_point()]
    device = tensors[0].device if tensors else _torch.device("cpu")
    dtype = floating[0].dtype if floating else getattr(_torch, init[4])
    return _model(init, device, dtype)(*inputs)


def make_inputs(axes, dtype, device, generator):
    namespace = _namespace(axes)
    seed = int(_torch.randint(0, 2**62, (1,), generator=generator, device=device).item())
    # made on the device itself (torch's factories default to it inside): at KernelBench's
    # published sizes a CPU draw of 6.4 GB, then its copy, took seconds per input set
    with _forked(device), device:
        _torch.manual_seed(seed)
        values = list(namespace["get_inputs"]())
    if len(values) != len(_INPUTS):
        raise ValueError(f"get_inputs() returned {{len(values)}} values; the problem was imported with {{len(_INPUTS)}}")
    inputs = {{}}
    for name, value in zip(_INPUTS, values):
        if isinstance(value, _torch.Tensor):
            value = value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
        inputs[name] = value
    inputs[{INIT_INPUT!r}] = _init(axes, dtype, device)
    return inputs
'''


def _write_staging(files: dict[str, str], out_dir: Path) -> Path:
    """The problem written to a work folder beside out_dir, renamed into place once checked."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=staging_folders.work_prefix(out_dir), dir=out_dir.parent))
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _forget_reference(folder: Path) -> None:
    """check_problem imported the staging copy's reference.py: drop it from sys.modules."""
    sys.modules.pop(f"gpuarena_reference_{abs(hash(str(folder.resolve() / 'reference.py')))}", None)


def _no_cpu_workload(file: _File, meta_error: str, check_device: str, out_dir: Path) -> str:
    """Why the problem has no CPU workload, and what the user can do about it."""
    why = (
        f"on the meta device forward raised {meta_error}"
        if meta_error
        else "its sizes are not top-level integer constants"
        if not file.sizes
        else f"halving its sizes ({', '.join(file.sizes)}) gave no valid shapes under the cap"
    )
    text = (
        f"no CPU-sized workload (at most {CPU_MAX_ELEMENTS} elements of data and {CPU_MAX_PARAMETERS} of "
        f"parameters) could be derived from the file: {why}; "
        "its workload runs on a GPU only"
    )
    if _device_type(check_device) != "cpu":
        return text
    return text + (
        ", so it was not checked here: it is written marked `unchecked` and its first run on a GPU checks it "
        f"(or `gpuarena check {out_dir} --device cuda` on a GPU machine, or import it there with --check-device cuda)"
    )


def _device_type(device: str) -> str:
    """The device's kind: cuda for cuda:1."""
    return device.split(":", 1)[0]


def import_file(
    path: Path | str,
    out_root: Path | str,
    *,
    level: int | None = None,
    dtypes: tuple[str, ...] = ("float32",),
    force: bool = False,
    keep_failing: bool = False,
    check_device: str = "cpu",
) -> Outcome:
    """One KernelBench problem file as the problem folder OUT_ROOT/levelN/NAME, checked with
    `gpuarena check` first. Never raises for the file's own faults: the Outcome says them."""
    path = Path(path)
    try:
        return _import_file(path, Path(out_root), level, dtypes, force, keep_failing, check_device)
    except GpuarenaError as exc:
        return Outcome(path, "error", messages=[str(exc)])


SMALL = "workload cpu-small"
"""How the check's findings on the derived CPU workload begin."""


def _axes(sizes: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


@dataclass
class _Written:
    """One file's problem, written to staging folders beside out_dir and checked there: once,
    or again with other CPU sizes."""

    file: _File
    name: str
    level: int
    outputs: list[str]
    input_names: list[str]
    dtypes: tuple[str, ...]
    out_dir: Path

    def staged(self, small: dict[str, int] | None, whole_on_cpu: bool) -> tuple[Path, Workloads]:
        file, workloads = self.file, []
        for dtype in self.dtypes:
            suffix = "" if self.dtypes == ("float32",) else f"-{dtype}"
            everywhere = ["cpu", "cuda"]
            workloads.append(
                (f"kernelbench{suffix}", dict(file.sizes), dtype, everywhere if whole_on_cpu else ["cuda"])
            )
            if small is not None:
                workloads.append((f"cpu-small{suffix}", small, dtype, everywhere))
        hub = uses_transformers(file.source)
        files = {
            "problem.toml": problem_toml(file, self.name, self.level, self.outputs, workloads),
            "reference.py": HEADER
            + "\n"
            + (PROLOGUE + "\n" if hub else "")
            + file.source.rstrip("\n")
            + "\n"
            + _glue(self.input_names, file.hub if hub else None),
            "README.md": readme(file, self.name, workloads),
        }
        return _write_staging(files, self.out_dir), workloads

    def checked(self, staging: Path, check_device: str, no_cpu_workload: bool) -> tuple[list[str], list[str]]:
        """`gpuarena check`'s errors and what it noted and let pass, said of out_dir (where there
        is no CPU workload, the importer's own note says so, with what the user can do: the
        check's fix names a file not kept)."""
        from gpuarena.harness.problem_check import check_problem

        try:
            report = check_problem(staging, device=check_device)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        finally:
            _forget_reference(staging)

        def here(message: str) -> str:  # said of the folder the problem goes to
            return message.replace(str(staging), str(self.out_dir)).replace(staging.name, self.name)

        errors = [here(m) for m in report.errors if not (no_cpu_workload and "no workload runs on the CPU" in m)]
        return errors, [here(m) for m in report.notes]


def _import_file(
    path: Path,
    out_root: Path,
    level: int | None,
    dtypes: tuple[str, ...],
    force: bool,
    keep_failing: bool,
    check_device: str,
) -> Outcome:
    for dtype in dtypes:
        if dtype not in TOLERANCE:
            raise KernelBenchError(
                path, f"dtype {dtype!r} is not one KernelBench evaluates", f"use {', '.join(TOLERANCE)}"
            )
    file = read_file(path)
    if INIT_INPUT in file.sizes:
        raise KernelBenchError(
            path, f"has a top-level constant named {INIT_INPUT!r}, the name of gpuarena's init input"
        )
    number = level_of(path, level)
    name = problem_name(path)
    out_dir = out_root / f"level{number}" / name
    meta_error = ""
    try:
        full: _Probe | None = _probe(file, file.sizes, "meta")
    except KernelBenchError:
        raise
    except Exception as exc:  # an op without meta support (or a broken model): a CPU run decides
        full, meta_error = None, f"{type(exc).__name__}: {exc}"
    notes: list[str] = []
    small: dict[str, int] | None = None
    if full is not None:
        whole_on_cpu = full.fits_the_cpu()
        if not whole_on_cpu:
            small = small_sizes(file, shrink_hub=full.parameters > CPU_MAX_PARAMETERS)
    else:  # shapes unknown without running it: inputs small enough are run on the CPU, or halved to be
        whole_on_cpu = _input_elements(file) <= CPU_MAX_ELEMENTS and not file.hub  # hub weights: GPU-sized
        if not whole_on_cpu:
            small = small_inputs(file)
    cpu_sizes = file.sizes if whole_on_cpu else small
    if cpu_sizes is None:
        notes.append(_no_cpu_workload(file, meta_error, check_device, out_dir))
    cpu = None
    if cpu_sizes is not None:
        try:
            cpu = _probe(file, cpu_sizes, "cpu")
        except KernelBenchError:
            raise
        except Exception as exc:  # the model itself fails: the user's file
            at = "" if whole_on_cpu else f" at the CPU workload's sizes {cpu_sizes}"
            raise KernelBenchError(
                path, f"Model(*get_init_inputs())(*get_inputs()){at} raised {type(exc).__name__}: {exc}"
            ) from None
    probe = cpu or full
    if probe is None:
        raise KernelBenchError(
            path,
            f"forward() could not be run: on the meta device it raised {meta_error}, and the "
            "file's sizes are too large for a CPU run",
            "check the file runs in KernelBench",
        )
    input_names = _names_from_forward(file.namespace["Model"], probe.n_inputs)
    outputs = ["output"] if len(probe.outputs) == 1 else [f"output{i}" for i in range(len(probe.outputs))]

    staging_folders.clear_stale(out_dir)  # what an import killed before it finished left beside it
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise KernelBenchError(path, f"{out_dir} exists and is not empty", "--force replaces it")
    written = _Written(file, name, number, outputs, input_names, dtypes, out_dir)
    staging, workloads = written.staged(None if whole_on_cpu else small, whole_on_cpu)
    if cpu_sizes is None and _device_type(check_device) == "cpu":
        mark_unchecked(staging, devices_not_checked(staging, check_device))  # its first GPU run checks it
    findings, said = written.checked(staging, check_device, cpu_sizes is None)
    if full is not None and small is not None and findings and all(f.startswith(SMALL) for f in findings):
        # the sizes halved one at a time lost a ratio the computation needs: every size halved together
        together = small_sizes(file, shrink_hub=full.parameters > CPU_MAX_PARAMETERS, together=True)
        if together is not None and together != small:
            again, workloads_again = written.staged(together, False)
            found_again, said_again = written.checked(again, check_device, False)
            if found_again:
                shutil.rmtree(again, ignore_errors=True)  # no better: the first sizes' findings stand
            else:
                notes.append(
                    f"the CPU workload's sizes halved one at a time ({_axes(small)}) failed its check "
                    f"({'; '.join(findings)}); every size halved together ({_axes(together)}) passes, and is kept"
                )
                shutil.rmtree(staging, ignore_errors=True)
                staging, workloads, findings, said = again, workloads_again, [], said_again
    outcome = Outcome(
        path,
        "failed-check" if findings else "imported",
        problem_id=f"level{number}/{name}",
        messages=notes + findings,
        workloads=[w[0] for w in workloads],
        notes=said,
    )
    if not findings or keep_failing:
        staging_folders.put_in_place(staging, out_dir)
        outcome.folder = out_dir
    else:
        shutil.rmtree(staging, ignore_errors=True)
    return outcome


def kernelbench_files(paths: list[Path]) -> list[Path]:
    """The .py files named, and those in the folders named (recursively, sorted)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.py") if "__pycache__" not in p.parts)
        else:
            found.append(path)
    return found


def import_files(paths: Sequence[Path | str], out_root: Path | str, **options: Any) -> list[Outcome]:
    """Every KernelBench file among paths imported under out_root; one file's fault stops no other."""
    outcomes = []
    for path in kernelbench_files([Path(p) for p in paths]):
        if not path.exists():
            outcomes.append(Outcome(path, "error", messages=[f"{path}: not found"]))
            continue
        outcomes.append(import_file(path, out_root, **options))
    return outcomes
