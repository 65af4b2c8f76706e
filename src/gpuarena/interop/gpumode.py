"""GPU MODE into gpuarena: `gpuarena import gpumode PATH... -o DIR`.

A GPU MODE problem folder (gpu-mode/reference-kernels, problems/GROUP/NAME/) holds `task.yml`
(its `tests` and `benchmarks`: lists of keyword arguments of `generate_input`, each with a
`seed`; time-outs; the files the eval puts beside the submission, `utils.py` among them),
`reference.py` (`generate_input(**args, seed)` -> `data`, `ref_kernel(data)` -> the expected
output, `check_implementation(data, output)` -> '' or (ok, message)) and `task.py` (the types
`input_t`, `output_t`). A submission defines `custom_kernel(data)`.

The choices:

- Workloads. Every entry of `tests` and `benchmarks` becomes a workload (`test0-size1024`,
  `bench0-size4096`, names from the entry's arguments), in that order. Its axes are the
  entry's integer arguments plus `case`, the entry's index in a table in the glue that keeps
  every argument (floats and strings included, which axes cannot hold). GPU MODE ranks on its
  benchmarks: test workloads weigh 0.01, so a score is the benchmarks' wherever they run. A
  workload runs on the CPU when its data could be made on the CPU at import and holds at most
  CPU_MAX_ELEMENTS elements; else on CUDA only. task.yml's time-outs become time_limits.
- Seeds. The supervisor keeps control of the seed: make_inputs() draws the `seed` it passes
  to `generate_input` from the harness's generator (below 2**31 - 2**20, as GPU MODE files do
  arithmetic on it), so inputs are fresh and secret in every draw, ranked runs included. The
  entries' own seeds are GPU MODE's fixed test inputs: the importer uses them once, to make
  the data it probes and to run the task's own `check_implementation` on the reference's
  output; they are kept in the table for the record and never used in a run.
- Inputs. `data` (a tensor, or tuples, lists and string-keyed dicts of tensors and numbers)
  is flattened: each tensor is one named input of reference() (names from the first line of
  ref_kernel that unpacks `data`, `a, b, c = data`, else data0, data1, ...), and the last
  input, `gpumode_data` = (format, layout, output layout), a plain tuple that is the same in
  every draw of a workload (the supervisor refuses one that changes), says how to rebuild
  `data` exactly: numbers, strings and None in data travel inside it. A tensor that
  ref_kernel writes into, or whose values do not change its result, is an output buffer (GPU
  MODE's `output = torch.empty(...)` in data): it is not an input (a solution writing into
  its input is refused, and a check needs inputs that matter) but a buffer leaf of the layout,
  made afresh on every call by the glue and by the adapter, zeroed where generate_input
  zeroed it. The adapter (interop/gpumode_solution.py, added to a one-file solution defining
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
  `task` and `utils` in sys.modules for the time of their import only;
- `problem.toml` and `README.md`.

Every problem is checked with `gpuarena check` before it is put in place; one that fails is
reported with the check's findings and not written, unless asked (--keep-failing).
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from gpuarena.errors import GpuarenaError
from gpuarena.interop.outcome import Outcome, SourceError
from gpuarena.interop.gpumode_solution import FORMAT, META_INPUT, RUNTIME

CPU_MAX_ELEMENTS = 1 << 22
"""A workload whose data and outputs hold at most this many elements runs on the CPU."""
SEED_BOUND = 2**31 - 2**20
TEST_WEIGHT = 0.01
GPUMODE_DEFAULT = (1e-5, 1e-8)
"""(rtol, atol) of GPU MODE's make_match_reference and verbose_allclose when not given."""
_DEFAULT_L2 = {"float64": 1e-7, "float32": 1e-4, "float16": 5e-3, "bfloat16": 1e-2}
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
_FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
_FILES = ("task.yml", "reference.py", "task.py")

GPU_MODE_UTILS = '''\
"""Written by gpuarena (interop/gpumode.py): the checking helpers of GPU MODE's utils.py, for a
task folder that came without its utils.py."""
import torch


@torch.no_grad()
def verbose_allclose(received, expected, rtol=1e-05, atol=1e-08, max_print=5):
    if received.shape != expected.shape:
        return ["SIZE MISMATCH"]
    diff = torch.abs(received - expected)
    mismatched = diff > atol + rtol * torch.abs(expected)
    mismatched |= torch.logical_xor(torch.isnan(received), torch.isnan(expected))
    mismatched |= torch.logical_xor(torch.isposinf(received), torch.isposinf(expected))
    mismatched |= torch.logical_xor(torch.isneginf(received), torch.isneginf(expected))
    count = int(mismatched.count_nonzero())
    if count:
        return [f"Number of mismatched elements: {count}"] + [
            f"ERROR AT {tuple(i.tolist())}: {received[tuple(i.tolist())]} {expected[tuple(i.tolist())]}"
            for i in torch.nonzero(mismatched)[:max_print]]
    return []


@torch.no_grad()
def verbose_allequal(received, expected, max_print=5):
    mismatched = torch.not_equal(received, expected)
    count = int(mismatched.count_nonzero())
    if count:
        return [f"Number of mismatched elements: {count}"] + [
            f"ERROR AT {tuple(i.tolist())}: {received[tuple(i.tolist())]} {expected[tuple(i.tolist())]}"
            for i in torch.nonzero(mismatched)[:max_print]]
    return []


def match_reference(data, output, reference, rtol=1e-05, atol=1e-08):
    reasons = verbose_allclose(output, reference(data), rtol=rtol, atol=atol)
    if reasons:
        return False, "mismatch found! custom implementation doesn't match reference: " + " ".join(reasons)
    return True, ""


def make_match_reference(reference, **kwargs):
    def wrapped(data, output):
        return match_reference(data, output, reference=reference, **kwargs)
    return wrapped


def set_seed(seed=42):
    import random
    random.seed(seed)
    torch.manual_seed(seed)
'''


class GpuModeError(SourceError):
    """A GPU MODE folder that cannot be imported; the message names the file and why."""


# -- task.yml -----------------------------------------------------------------------------------

def read_task_yml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GpuModeError(path, f"cannot be read: {exc}") from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise GpuModeError(path, f"is not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise GpuModeError(path, "is not a mapping of keys (files, tests, benchmarks, ...)")
    return document


# -- the task's files ---------------------------------------------------------------------------

@dataclass
class Case:
    kind: Literal["test", "bench"]
    index: int
    args: dict[str, Any]
    """generate_input's keyword arguments, without the seed."""
    seed: int

    @property
    def name(self) -> str:
        parts = [f"{self.kind}{self.index}"] + [f"{k}{v}" for k, v in self.args.items()]
        return re.sub(r"[^A-Za-z0-9_.\-]+", "_", "-".join(parts))[:80].strip("_-.") or f"{self.kind}{self.index}"


@dataclass
class Task:
    folder: Path
    yml: dict[str, Any]
    sources: dict[str, str]
    """reference.py, task.py, utils.py, task.yml: their text."""
    utils_from: str
    cases: list[Case]
    namespace: dict[str, Any]


def _cases(yml: dict[str, Any], path: Path) -> list[Case]:
    cases: list[Case] = []
    for key, kind in (("tests", "test"), ("benchmarks", "bench")):
        entries = yml.get(key) or []
        if not isinstance(entries, list):
            raise GpuModeError(path, f"{key} is a {type(entries).__name__}, not a list of argument mappings")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                raise GpuModeError(path, f"{key}[{i}] is a {type(entry).__name__}, not a mapping of arguments")
            args = dict(entry)
            seed = args.pop("seed", None)
            if type(seed) is not int:
                raise GpuModeError(path, f"{key}[{i}] has no integer seed", "every test and benchmark gives its seed")
            for name, value in args.items():
                if not (isinstance(name, str) and name.isidentifier()) or not isinstance(value, (bool, int, float, str)):
                    raise GpuModeError(path, f"{key}[{i}]: argument {name!r} = {value!r} is not a name with a number "
                                       "or string")
            cases.append(Case(kind, i, args, seed))
    if not cases:
        raise GpuModeError(path, "has no tests and no benchmarks", "list generate_input's arguments under tests:")
    names = [c.name for c in cases]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise GpuModeError(path, f"two entries make the workload name {repeated[0]!r} (the same arguments twice?)")
    return cases


def _utils(folder: Path, yml: dict[str, Any]) -> tuple[str, str]:
    """(utils.py's text, where it came from)."""
    candidates = []
    for entry in yml.get("files") or []:
        if isinstance(entry, dict) and entry.get("name") == "utils.py" and isinstance(entry.get("source"), str):
            candidates.append(folder / entry["source"])
    candidates += [folder / "utils.py", folder.parent / "utils.py"]
    for candidate in candidates:
        if candidate.is_file():
            try:
                return candidate.read_text(encoding="utf-8"), str(candidate)
            except (OSError, UnicodeDecodeError) as exc:
                raise GpuModeError(candidate, f"cannot be read: {exc}") from None
    return GPU_MODE_UTILS, "gpuarena"


def load_namespace(sources: dict[str, str], folder: Path, name: str) -> dict[str, Any]:
    """Run utils.py, task.py and reference.py, with `utils` and `task` in sys.modules only for
    the time of the import (several tasks may be loaded in one process)."""
    import types

    saved = {key: sys.modules.get(key) for key in ("utils", "task")}
    try:
        for key in ("utils", "task"):
            module = types.ModuleType(key)
            module.__file__ = str(folder / f"{key}.py")
            sys.modules[key] = module
            exec(compile(sources[f"{key}.py"], str(folder / f"{key}.py"), "exec"), module.__dict__)  # noqa: S102
        namespace: dict[str, Any] = {"__name__": name, "__file__": str(folder / "reference.py")}
        exec(compile(sources["reference.py"], str(folder / "reference.py"), "exec"), namespace)  # noqa: S102
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
    return namespace


def read_task(folder: Path) -> Task:
    """The folder's task.yml, reference.py and task.py read and run; names each missing file."""
    if not folder.is_dir():
        raise GpuModeError(folder, "not found" if not folder.exists() else "is not a folder",
                           "give a GPU MODE problem folder (task.yml, reference.py, task.py)")
    for name in _FILES:
        if not (folder / name).is_file():
            raise GpuModeError(folder / name, "not found",
                               "a GPU MODE problem folder holds task.yml, reference.py and task.py")
    sources: dict[str, str] = {}
    for name in _FILES:
        try:
            sources[name] = (folder / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise GpuModeError(folder / name, f"cannot be read: {exc}") from None
    yml = read_task_yml(folder / "task.yml")
    cases = _cases(yml, folder / "task.yml")
    sources["utils.py"], utils_from = _utils(folder, yml)
    for name in ("reference.py", "task.py", "utils.py"):
        try:
            ast.parse(sources[name])
        except SyntaxError as exc:
            where = folder / name if name != "utils.py" or utils_from == "gpuarena" else Path(utils_from)
            raise GpuModeError(where, f"is not valid Python: line {exc.lineno}: {exc.msg}") from None
    tree = ast.parse(sources["reference.py"])
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for required in ("generate_input", "ref_kernel", "check_implementation"):
        if required not in defined:
            raise GpuModeError(folder / "reference.py", f"defines no {required}",
                               "a GPU MODE reference.py defines generate_input, ref_kernel and check_implementation")
    if re.search(r"^(async\s+)?def\s+custom_kernel\s*\(", sources["reference.py"], re.MULTILINE):
        raise GpuModeError(folder / "reference.py", "defines custom_kernel: it is a submission, not a reference")
    try:
        namespace = load_namespace(sources, folder, "gpumode_reference")
    except Exception as exc:  # noqa: BLE001  the task's own error, reported with its name
        raise GpuModeError(folder / "reference.py", f"running it failed: {type(exc).__name__}: {exc}") from None
    for required in ("generate_input", "ref_kernel", "check_implementation"):
        if not callable(namespace.get(required)):
            raise GpuModeError(folder / "reference.py", f"{required} is not a function")
    sources["task.yml"] = (folder / "task.yml").read_text(encoding="utf-8")
    return Task(folder, yml, sources, utils_from, cases, namespace)


# -- how check_implementation judges --------------------------------------------------------------

@dataclass
class Rule:
    atol: float
    rtol: float
    exact: bool
    how: str
    """In words, for the README."""
    checker: bool = False
    """Judged by the task's own check_implementation, run by the supervisor (ProblemSpec.checker),
    where it cannot be read as one tolerance."""


def _literal(node: ast.AST | None) -> float | None:
    try:
        value = ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def checking_rule(source: str, path: Path) -> Rule:
    """The tolerance check_implementation applies, read from reference.py's source."""
    tree = ast.parse(source)
    target: ast.AST | None = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "check_implementation":
            target = node
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "check_implementation"
                                                  for t in node.targets):
            target = node.value
    found: set[tuple[float, float, bool]] = set()
    other: list[str] = []
    for call in ast.walk(target) if target is not None else []:
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if name in ("make_match_reference", "match_reference", "verbose_allclose", "allclose", "isclose",
                    "assert_close"):
            positional = call.args[2:4] if name in ("verbose_allclose", "allclose", "isclose", "assert_close") else []
            rtol = _literal(keywords.get("rtol", positional[0] if positional else None))
            atol = _literal(keywords.get("atol", positional[1] if len(positional) > 1 else None))
            if ("rtol" in keywords and rtol is None) or ("atol" in keywords and atol is None) or any(
                    k not in ("rtol", "atol", "max_print", "reference", "equal_nan") for k in keywords):
                other.append(ast.unparse(call))
                continue
            if name == "assert_close" and (rtol is None) != (atol is None):
                other.append(ast.unparse(call))
                continue
            default = (1.3e-6, 1e-5) if name == "assert_close" else GPUMODE_DEFAULT
            found.add((default[1] if atol is None else atol, default[0] if rtol is None else rtol, False))
        elif name in ("verbose_allequal", "equal", "array_equal"):
            found.add((0.0, 0.0, True))
    calls_reference = target is not None and any(
        isinstance(n, ast.Name) and n.id == "ref_kernel" for n in ast.walk(target))
    if found and not other and not calls_reference:
        found = set()  # closeness to something other than ref_kernel's output: its own logic
    if target is None or not found or other or len(found) > 1:
        why = ("its checks cannot be read as one tolerance: " + "; ".join(other)) if other else (
            "it applies different tolerances" if len(found) > 1 else
            "it judges by its own logic, not by closeness to ref_kernel's output")
        return Rule(0.0, 0.0, False, f"the task's own check_implementation, run by gpuarena's supervisor on every "
                    f"checked output ({why})", checker=True)
    atol, rtol, exact = found.pop()
    if exact:
        return Rule(0.0, 0.0, True, "exact equality (check_implementation compares with verbose_allequal)")
    return Rule(atol, rtol, False, f"atol={atol:g}, rtol={rtol:g} (read from check_implementation)")


def _verdict(result: Any) -> tuple[bool, str]:
    """check_implementation's answer: '' or a message, or (ok, message), or a bool."""
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        return result[0], str(result[1])
    if isinstance(result, str):
        return result == "", result
    if isinstance(result, bool):
        return result, ""
    return False, f"returned {result!r}"


# -- probing the data ---------------------------------------------------------------------------

def _runtime() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(RUNTIME, "gpumode_runtime", "exec"), namespace)  # noqa: S102  gpuarena's own code
    return namespace


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_clone(v) for v in value)
    if isinstance(value, list):
        return [_clone(v) for v in value]
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _replace_leaf(value: Any, target: int, new: Any, counter: list[int]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        counter[0] += 1
        return new if counter[0] - 1 == target else value
    if isinstance(value, (tuple, list)):
        items = [_replace_leaf(v, target, new, counter) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _replace_leaf(v, target, new, counter) for k, v in value.items()}
    return value


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    import torch

    return len(a) == len(b) and all(
        isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and x.shape == y.shape and x.dtype == y.dtype
        and torch.equal(x, y) for x, y in zip(a, b))


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _generate(task: Task, case: Case, seed: int) -> Any:
    return task.namespace["generate_input"](**case.args, seed=seed)


def _ref(task: Task, data: Any) -> Any:
    import torch

    with torch.no_grad():
        return task.namespace["ref_kernel"](_clone(data))


def find_buffers(task: Task, case: Case, data: Any, rt: dict[str, Any]) -> dict[int, str]:
    """Tensors of data that ref_kernel writes into or does not read: output buffers (index ->
    "zeros" where generate_input made them zero, else "empty")."""
    import torch

    tensors, _ = rt["flatten"](data)
    device = rt["device_of"](tensors)
    copy = _clone(data)
    with torch.no_grad():
        out = task.namespace["ref_kernel"](copy)
    spec = rt["output_spec"](out)
    expected = rt["outputs"](_clone(out), spec, device)
    written = {i for i, (a, b) in enumerate(zip(tensors, rt["flatten"](copy)[0])) if not torch.equal(a, b)}
    other, _ = rt["flatten"](_generate(task, case, case.seed + 7919))
    unread = set()
    for i, t in enumerate(tensors):
        if i in written or i >= len(other) or other[i].shape != t.shape or other[i].dtype != t.dtype:
            continue
        fresh = other[i].to(t.device)
        if torch.equal(fresh, t):
            continue
        result = rt["outputs"](_ref(task, _replace_leaf(data, i, fresh, [0])), spec, device)
        if _same(result, expected):
            unread.add(i)
    return {i: "zeros" if not bool(tensors[i].any()) else "empty" for i in sorted(written | unread)}


def _input_names(task: Task, layout: tuple[Any, ...]) -> list[str]:
    """One name per tensor leaf: from `a, b, c = data` in ref_kernel where it says, else data0..."""
    top: list[str | None] = []
    for node in ast.parse(task.sources["reference.py"]).body:
        if isinstance(node, ast.FunctionDef) and node.name == "ref_kernel" and node.args.args:
            param = node.args.args[0].arg
            for statement in node.body:
                if (isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name)
                        and statement.value.id == param and len(statement.targets) == 1
                        and isinstance(statement.targets[0], (ast.Tuple, ast.List))):
                    top = [e.id if isinstance(e, ast.Name) else None for e in statement.targets[0].elts]
                    break
    names: list[str] = []

    def walk(node: tuple[Any, ...], parts: list[str]) -> None:
        kind = node[0]
        if kind == "t":
            names.append("_".join(parts) or "data")
        elif kind in ("tuple", "list"):
            for i, child in enumerate(node[1]):
                label = (top[i] if parts == [] and i < len(top) and top[i] else None) or (
                    f"data{i}" if not parts else str(i))
                walk(child, [*parts, label])
        elif kind == "dict":
            for key, child in node[1]:
                walk(child, [*parts, key] if parts else ["data", key])

    walk(layout, [])
    clean: list[str] = []
    for name in names:
        name = re.sub(r"\W+", "_", name).strip("_") or "data"
        if name[0].isdigit() or keyword.iskeyword(name) or name in (META_INPUT, "reference", "make_inputs"):
            name = f"data_{name}"
        base, k = name, 1
        while name in clean:
            name, k = f"{base}_{k}", k + 1
        clean.append(name)
    return clean


# -- writing the problem ------------------------------------------------------------------------

def problem_name(folder: Path) -> str:
    name = re.sub(r"[^a-z0-9_\-]+", "_", folder.resolve().name.lower()).strip("_-")
    return name or "gpumode_problem"


def _glue(names: list[str], cases: list[Case], buffers: dict[int, str], spec: tuple[Any, ...]) -> str:
    table = [dict(c.args) for c in cases]
    seeds = [c.seed for c in cases]
    params = ", ".join([*names, META_INPUT])
    return f'''# gpuarena glue, written by `gpuarena import gpumode` (gpuarena/interop/gpumode.py): the GPU MODE
# task's files are in gpumode/, verbatim. reference() rebuilds GPU MODE's data from the tensors
# and the last input (how data is laid out) and calls ref_kernel(data); make_inputs() calls
# generate_input(**the workload's arguments, seed=S) with S drawn from the harness's generator,
# never the task's fixed seed, so inputs are fresh and secret in every draw.
from pathlib import Path as _Path

{RUNTIME}
_FOLDER = _Path(__file__).resolve().parent / "gpumode"
_FORMAT = {FORMAT!r}
_INPUTS = {names!r}
_CASES = {table!r}
"""Each workload's generate_input arguments (axes["case"] indexes it; integer axes override)."""
_TASK_SEEDS = {seeds!r}
"""task.yml's own seeds: GPU MODE's fixed test inputs, kept for the record; never used here."""
_BUFFERS = {buffers!r}
"""Tensors of data that are output buffers: index -> how they are made on every call."""
_OUTPUT = {spec!r}
_SEED_BOUND = {SEED_BOUND}
_task = None


def _gpumode():
    global _task
    if _task is None:
        sources = {{name: (_FOLDER / name).read_text(encoding="utf-8")
                   for name in ("reference.py", "task.py", "utils.py")}}
        _task = _load(sources, _FOLDER, "gpumode_reference_" + str(abs(hash(str(_FOLDER)))))
    return _task


def _load(sources, folder, name):
    import sys
    import types

    saved = {{key: sys.modules.get(key) for key in ("utils", "task")}}
    try:
        for key in ("utils", "task"):
            module = types.ModuleType(key)
            module.__file__ = str(folder / (key + ".py"))
            sys.modules[key] = module
            exec(compile(sources[key + ".py"], module.__file__, "exec"), module.__dict__)
        namespace = {{"__name__": name, "__file__": str(folder / "reference.py")}}
        exec(compile(sources["reference.py"], namespace["__file__"], "exec"), namespace)
    finally:
        for key, module in saved.items():
            if module is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = module
    return namespace


def reference({params}):
    tensors = [{", ".join(names)}]
    _, layout, spec = {META_INPUT}
    device = device_of(tensors)
    with _torch.no_grad():
        return outputs(_gpumode()["ref_kernel"](rebuild(layout, tensors, device)), spec, device)


def make_inputs(axes, dtype, device, generator):
    args = dict(_CASES[axes["case"]])
    args.update({{k: v for k, v in axes.items() if k != "case"}})
    seed = int(_torch.randint(0, _SEED_BOUND, (1,), generator=generator, device=device).item())
    tensors, layout = flatten(_gpumode()["generate_input"](**args, seed=seed), _BUFFERS)
    if len(tensors) != len(_INPUTS):
        raise ValueError(f"generate_input made {{len(tensors)}} input tensors; the problem was imported with "
                         f"{{len(_INPUTS)}} ({{', '.join(_INPUTS)}})")
    inputs = {{name: t.to(device) for name, t in zip(_INPUTS, tensors)}}
    inputs[{META_INPUT!r}] = (_FORMAT, layout, _OUTPUT)
    return inputs
'''


CHECK_GLUE = f'''

def check(inputs, outputs, expected):
    """The task's check_implementation(data, output) on GPU MODE's data rebuilt from the inputs
    and the outputs in ref_kernel's shape: '' when it accepts them, else its message."""
    tensors = [inputs[name] for name in _INPUTS]
    _, layout, spec = inputs[{META_INPUT!r}]
    result = _gpumode()["check_implementation"](rebuild(layout, tensors, device_of(tensors)), restructure(outputs, spec))
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], bool):
        return "" if result[0] else str(result[1]) or "check_implementation rejected the output"
    if isinstance(result, bool):
        return "" if result else "check_implementation rejected the output"
    return result if isinstance(result, str) else f"check_implementation returned {{result!r}}"
'''
"""The imported problem's checker (ProblemSpec.checker), where check_implementation is its own logic."""


def _toml(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _problem_toml(task: Task, name: str, level: int, outputs: list[str], rule: Rule,
                  workloads: list[tuple[Case, dict[str, int], str, list[str]]], how: str) -> str:
    summary = next((line.strip() for line in str(task.yml.get("description") or "").splitlines() if line.strip()),
                   f"GPU MODE problem {task.folder.name}")
    lines = [
        f"# Imported from the GPU MODE problem folder {_toml(task.folder.name)} by `gpuarena import gpumode`.",
        f"name = {_toml(name)}",
        f"level = {level}",
        f"summary = {_toml(summary)}",
        'tags = ["gpumode"]',
        'convention = "return"',
        *(['checker = "check"  # the task\'s check_implementation (reference.py\'s check)'] if rule.checker else []),
        f"outputs = [{', '.join(_toml(o) for o in outputs)}]",
        "",
        "[provenance]",
        'framework = "gpumode"',
        f"operator = {_toml(task.folder.name)}",
        "",
    ]
    limits = {mode: task.yml.get(f"{mode}_timeout") for mode in ("test", "benchmark", "ranked")}
    limits = {k: min(float(v), 3600.0) for k, v in limits.items() if isinstance(v, (int, float)) and v > 0}
    if limits:
        lines += ["[time_limits]  # task.yml's time-outs"] + [f"{k} = {v!r}" for k, v in limits.items()] + [""]
    lines.append(f"# check_implementation: {how}")
    for dtype in sorted({w[2] for w in workloads}) if not rule.checker else []:
        if rule.exact:
            atol = rtol = l2 = 0.0
        else:
            atol, rtol = rule.atol, rule.rtol
            l2 = max(_DEFAULT_L2.get(dtype, rtol), rtol)
        lines += [f"[tolerance.{dtype}]", f"atol = {atol!r}", f"rtol = {rtol!r}", f"l2 = {l2!r}", ""]
    for case, axes, dtype, devices in workloads:
        axis_text = ", ".join(f"{k} = {v}" for k, v in axes.items())
        lines += ["[[workloads]]", f"name = {_toml(case.name)}", f"axes = {{ {axis_text} }}", f"dtype = {_toml(dtype)}"]
        if case.kind == "test":
            lines.append(f"weight = {TEST_WEIGHT}  # GPU MODE ranks on its benchmarks")
        lines += [f"devices = [{', '.join(_toml(d) for d in devices)}]", ""]
    return "\n".join(lines)


def _readme(task: Task, name: str, how: str, names: list[str],
            workloads: list[tuple[Case, dict[str, int], str, list[str]]]) -> str:
    rows = "\n".join(f"| {c.name} | {', '.join(f'{k}={v}' for k, v in c.args.items()) or '-'} | {c.seed} | {d} | "
                     f"{', '.join(dv)} |" for c, _, d, dv in workloads)
    description = str(task.yml.get("description") or "").strip()
    return f"""# {name}

{description or f"GPU MODE problem {task.folder.name}."}

Imported from the GPU MODE problem folder `{task.folder.name}` by `gpuarena import gpumode`;
`gpumode/` holds its files verbatim. A GPU MODE submission (`custom_kernel(data)`) runs as it is:

```bash
gpuarena run PROBLEM submission.py --device cuda
```

`data` is made by the task's `generate_input` with a seed drawn by gpuarena's harness for every
draw (task.yml's seeds, in the table, are not used). It reaches `reference()` and `solve()` as
the tensors {', '.join(f'`{n}`' for n in names)} and `{META_INPUT}`, which says how to rebuild it.

Checking: {how}.

| workload | arguments | task.yml seed | dtype | devices |
| --- | --- | --- | --- | --- |
{rows}
"""


def _write_staging(files: dict[str, str], out_dir: Path) -> Path:
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    for name, text in files.items():
        (staging / name).parent.mkdir(parents=True, exist_ok=True)
        (staging / name).write_text(text, encoding="utf-8")
    return staging


def import_folder(folder: Path | str, out_root: Path | str, *, level: int = 1, atol: float | None = None,
                  rtol: float | None = None, exact: bool = False, force: bool = False,
                  keep_failing: bool = False, check_device: str = "cpu") -> Outcome:
    """One GPU MODE problem folder as the problem folder OUT_ROOT/levelN/NAME, checked with
    `gpuarena check` first. Never raises for the folder's own faults: the Outcome says them."""
    folder = Path(folder)
    try:
        return _import_folder(folder, Path(out_root), level, atol, rtol, exact, force, keep_failing, check_device)
    except GpuarenaError as exc:
        return Outcome(folder, "error", messages=[str(exc)])


def _import_folder(folder: Path, out_root: Path, level: int, atol: float | None, rtol: float | None, exact: bool,
                   force: bool, keep_failing: bool, check_device: str) -> Outcome:
    import torch

    from gpuarena.problems.check import check_problem

    if not 1 <= level <= 4:
        raise GpuModeError(folder, f"level {level} is not one of gpuarena's levels 1-4", "give --level 1-4")
    task = read_task(folder)
    reference = folder / "reference.py"
    if exact or atol is not None or rtol is not None:
        if exact and (atol or rtol):
            raise GpuModeError(folder, "--exact with a non-zero --atol or --rtol")
        rule = Rule(atol or 0.0, rtol or 0.0, exact or not (atol or rtol),
                    f"atol={atol or 0:g}, rtol={rtol or 0:g} given to the importer, judged by closeness to "
                    "ref_kernel's output in place of the task's check_implementation")
        how = checking_rule(task.sources["reference.py"], reference).how + "; overridden: " + rule.how
    else:
        rule = checking_rule(task.sources["reference.py"], reference)
        how = rule.how
    rt = _runtime()
    notes: list[str] = []
    probes: dict[int, tuple[Any, Any]] = {}
    buffers: dict[int, str] | None = None
    spec: tuple[Any, ...] | None = None
    layout_tensors: int | None = None
    first_layout: tuple[Any, ...] | None = None
    first: tuple[Any, Any] = (None, None)
    device = torch.device(check_device)
    for index, case in enumerate(task.cases):
        try:
            data = _generate(task, case, case.seed)
            tensors, layout = rt["flatten"](data)
        except TypeError as exc:
            raise GpuModeError(reference, f"generate_input(**{case.name}): {exc}") from None
        except Exception as exc:  # noqa: BLE001  e.g. device="cuda" on a machine without one
            notes.append(f"{case.name}: generate_input raised {type(exc).__name__}: {exc}; CUDA only, not probed")
            continue
        tensors = [t.to(device) for t in tensors]
        data = rt["rebuild"](layout, tensors, device)
        elements = sum(t.numel() for t in tensors)
        if elements > CPU_MAX_ELEMENTS and probes:
            probes[index] = (elements, tensors)
            continue
        try:
            out = _ref(task, data)
            case_spec = rt["output_spec"](out)
        except TypeError as exc:
            raise GpuModeError(reference, f"ref_kernel on {case.name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            raise GpuModeError(reference, f"ref_kernel on {case.name} raised {type(exc).__name__}: {exc}") from None
        if spec is None:
            spec, first_layout, first = case_spec, layout, (data, out)
            buffers = find_buffers(task, case, data, rt)
            ok, message = _verdict(task.namespace["check_implementation"](_clone(data), _clone(out)))
            if not ok:
                raise GpuModeError(reference, f"check_implementation rejects ref_kernel's own output on {case.name} "
                                   f"(seed {case.seed}): {message.strip()[:300]}")
            if spec == ("t",) and bool(out.any()):
                try:
                    accepted, _ = _verdict(task.namespace["check_implementation"](_clone(data), torch.zeros_like(out)))
                except Exception:  # noqa: BLE001  a checker that fails on zeros rejects them
                    accepted = False
                if accepted:
                    notes.append(f"check_implementation accepts zeros on {case.name}; gpuarena check decides")
        elif case_spec != spec:
            raise GpuModeError(reference, f"ref_kernel returns {case_spec} on {case.name} but {spec} on the first "
                               "entry; gpuarena needs the same outputs for every workload")
        if len(tensors) != (layout_tensors if layout_tensors is not None else len(tensors)) or (
                first_layout is not None and _shape_of(layout) != _shape_of(first_layout)):
            raise GpuModeError(reference, f"generate_input's data on {case.name} is laid out unlike on the first entry; "
                               "gpuarena needs the same structure in every workload")
        layout_tensors = len(tensors)
        probes[index] = (elements, tensors)
    if spec is None or buffers is None or first_layout is None:
        raise GpuModeError(reference, "no entry of tests or benchmarks could be run here: " + "; ".join(notes),
                           "import on a machine with a GPU (--check-device cuda)")
    _, stored = rt["flatten"](first[0], buffers)
    names = _input_names(task, stored)
    n_outputs = len(rt["outputs"](first[1], spec, device))
    outputs = ["output"] if n_outputs == 1 else [f"output{i}" for i in range(n_outputs)]
    dtypes_seen = [_workload_dtype(p[1]) for p in probes.values()]
    fallback = max(set(dtypes_seen), key=dtypes_seen.count)
    workloads = []
    for index, case in enumerate(task.cases):
        axes = {"case": index, **{k: v for k, v in case.args.items() if type(v) is int and k != "case"}}
        if index in probes:
            elements, tensors = probes[index]
            on_cpu = device.type == "cpu" and elements <= CPU_MAX_ELEMENTS
            dtype = _workload_dtype(tensors)
        else:
            on_cpu, dtype = False, fallback
        workloads.append((case, axes, dtype, ["cpu", "cuda"] if on_cpu else ["cuda"]))
    name = problem_name(folder)
    files = {
        "problem.toml": _problem_toml(task, name, level, outputs, rule, workloads, how),
        "reference.py": _glue(names, task.cases, buffers, spec) + (CHECK_GLUE if rule.checker else ""),
        "README.md": _readme(task, name, how, names, workloads),
        "gpumode/task.yml": task.sources["task.yml"],
        "gpumode/reference.py": task.sources["reference.py"],
        "gpumode/task.py": task.sources["task.py"],
        "gpumode/utils.py": task.sources["utils.py"],
    }
    if task.utils_from == "gpuarena":
        notes.append("no utils.py beside the task or named in task.yml: gpumode/utils.py is gpuarena's copy of GPU "
                     "MODE's checking helpers")
    out_dir = out_root / f"level{level}" / name
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise GpuModeError(folder, f"{out_dir} exists and is not empty", "--force replaces it")
    staging = _write_staging(files, out_dir)
    try:
        report = check_problem(staging, device=check_device)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        sys.modules.pop(f"gpuarena_reference_{abs(hash(str(staging.resolve() / 'reference.py')))}", None)
    findings = [m.replace(str(staging), str(out_dir)).replace(staging.name, name) for m in report.errors]
    outcome = Outcome(folder, "imported" if report.ok else "failed-check", problem_id=f"level{level}/{name}",
                      messages=notes + findings, workloads=[w[0].name for w in workloads])
    if report.ok or keep_failing:
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
        outcome.folder = out_dir
    else:
        shutil.rmtree(staging, ignore_errors=True)
    return outcome


def _shape_of(layout: tuple[Any, ...]) -> Any:
    """A layout's structure without its scalar values (sizes differ between entries)."""
    kind = layout[0]
    if kind in ("tuple", "list"):
        return (kind, tuple(_shape_of(c) for c in layout[1]))
    if kind == "dict":
        return (kind, tuple((k, _shape_of(c)) for k, c in layout[1]))
    return (kind,)


def _workload_dtype(tensors: list[Any]) -> str:
    names = [_dtype_name(t.dtype) for t in tensors]
    for name in names:
        if name in _FLOAT_DTYPES:
            return name
    return next((n for n in names if n in _DTYPES), "float32")


def gpumode_folders(paths: list[Path]) -> list[Path]:
    """The task folders named (those holding task.yml), and those right under a folder named
    that holds none itself (a GPU MODE group such as problems/pmpp)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir() and not (path / "task.yml").exists():
            inner = sorted(p.parent for p in path.glob("*/task.yml"))
            found += inner or [path]
        else:
            found.append(path)
    return found


def import_folders(paths: list[Path | str], out_root: Path | str, **options: Any) -> list[Outcome]:
    """Every GPU MODE folder among paths imported under out_root; one folder's fault stops no other."""
    return [import_folder(folder, out_root, **options) for folder in gpumode_folders([Path(p) for p in paths])]
