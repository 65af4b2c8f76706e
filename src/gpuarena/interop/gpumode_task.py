"""Reading a GPU MODE problem folder (see interop/gpumode.py): task.yml parsed into its cases,
the task's files (reference.py, task.py, utils.py) checked and run, and how check_implementation
judges, read from reference.py's source."""

from __future__ import annotations

import ast
import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs (types-PyYAML is not installed)

from gpuarena.interop.gpumode_needs import missing_modules, missing_text
from gpuarena.interop.outcome import SourceError

GPUMODE_DEFAULT = (1e-5, 1e-8)
"""(rtol, atol) of GPU MODE's make_match_reference and verbose_allclose when not given."""
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
        parts = [f"{self.kind}{self.index}"] + [f"{k}{_name_part(v)}" for k, v in self.args.items()]
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


def _carried(value: Any) -> bool:
    """An argument the glue carries to generate_input: a number, a string, or a list of them
    (`shape: [128, 256]`), lists nested in lists included."""
    if isinstance(value, list):
        return all(_carried(v) for v in value)
    return isinstance(value, (bool, int, float, str))


def _name_part(value: Any) -> str:
    """An argument in a workload's name: a list as its items joined by x (`shape128x256`)."""
    if isinstance(value, list):
        return "x".join(_name_part(v) if not isinstance(v, list) else f"({_name_part(v)})" for v in value)
    return str(value)


def _cases(yml: dict[str, Any], path: Path) -> list[Case]:
    cases: list[Case] = []
    sections: tuple[tuple[str, Literal["test", "bench"]], ...] = (("tests", "test"), ("benchmarks", "bench"))
    for key, kind in sections:
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
                if not (isinstance(name, str) and name.isidentifier()) or not _carried(value):
                    raise GpuModeError(
                        path,
                        f"{key}[{i}]: argument {name!r} = {value!r} is not a name with a number, a string or a "
                        "list of them",
                    )
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
    the time of the import (several tasks may be loaded in one process). reference.py runs as
    the module NAME, put in sys.modules before it runs and left there, as an import would: a
    @dataclass (with string annotations) and pickling look the module up there."""
    import types

    saved = {key: sys.modules.get(key) for key in ("utils", "task")}
    try:
        for key in ("utils", "task"):
            module = types.ModuleType(key)
            module.__file__ = str(folder / f"{key}.py")
            sys.modules[key] = module
            exec(compile(sources[f"{key}.py"], str(folder / f"{key}.py"), "exec"), module.__dict__)
        reference = types.ModuleType(name)
        reference.__file__ = str(folder / "reference.py")
        sys.modules[name] = reference
        try:
            exec(compile(sources["reference.py"], str(folder / "reference.py"), "exec"), reference.__dict__)
        except BaseException:
            sys.modules.pop(name, None)
            raise
    finally:
        for key, previous in saved.items():
            if previous is None:
                sys.modules.pop(key, None)
            else:
                sys.modules[key] = previous
    return reference.__dict__


def _module_name(folder: Path) -> str:
    """The name reference.py runs under at import: one of its own for every task folder."""
    return "gpumode_reference_" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16]


def _uses_distributed(tree: ast.AST) -> bool:
    """Whether the source imports or names torch.distributed."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.startswith("torch.distributed") for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (
            (node.module or "").startswith("torch.distributed")
            or (node.module == "torch" and any(a.name == "distributed" for a in node.names))
        ):
            return True
        if isinstance(node, ast.Attribute) and ast.unparse(node).startswith("torch.distributed"):
            return True
    return False


def multi_gpu(yml: dict[str, Any], source: str, cases: list[Case]) -> str | None:
    """Why a task needs several GPUs at once (GPU MODE's amd_distributed tasks: `multi_gpu: true`,
    generate_input(rank, world_size, ...) called once a process, ref_kernel calling
    torch.distributed), or None. gpuarena runs a problem's reference and a solution in one
    process on one device, so such a task is refused before any of it runs."""
    tree = ast.parse(source)
    reasons = []
    if yml.get("multi_gpu"):
        reasons.append("task.yml says multi_gpu: true")
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "generate_input":
            params = [a.arg for a in node.args.posonlyargs + node.args.args + node.args.kwonlyargs]
            if "rank" in params and not any("rank" in c.args for c in cases):
                reasons.append("generate_input takes each process's rank, which task.yml does not give")
    if _uses_distributed(tree):
        reasons.append("reference.py uses torch.distributed")
    if not reasons:
        return None
    sizes = [v for c in cases for k, v in c.args.items() if k == "world_size" and type(v) is int]
    gpus = f"{max(sizes)} GPUs" if sizes else "several GPUs"
    return (
        f"needs {gpus} / torch.distributed ({'; '.join(reasons)}): gpuarena runs a problem's reference and "
        "solution in one process on one device"
    )


def read_task(folder: Path) -> Task:
    """The folder's task.yml, reference.py and task.py read and run; names each missing file."""
    if not folder.is_dir():
        raise GpuModeError(
            folder,
            "not found" if not folder.exists() else "is not a folder",
            "give a GPU MODE problem folder (task.yml, reference.py, task.py)",
        )
    for name in _FILES:
        if not (folder / name).is_file():
            raise GpuModeError(
                folder / name, "not found", "a GPU MODE problem folder holds task.yml, reference.py and task.py"
            )
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
    several = multi_gpu(yml, sources["reference.py"], cases)
    if several:
        raise GpuModeError(folder, several)
    missing = missing_modules(sources["reference.py"])
    if missing:
        raise GpuModeError(folder / "reference.py", *missing_text(missing))
    tree = ast.parse(sources["reference.py"])
    defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for required in ("generate_input", "ref_kernel", "check_implementation"):
        if required not in defined:
            raise GpuModeError(
                folder / "reference.py",
                f"defines no {required}",
                "a GPU MODE reference.py defines generate_input, ref_kernel and check_implementation",
            )
    if re.search(r"^(async\s+)?def\s+custom_kernel\s*\(", sources["reference.py"], re.MULTILINE):
        raise GpuModeError(folder / "reference.py", "defines custom_kernel: it is a submission, not a reference")
    try:
        namespace = load_namespace(sources, folder, _module_name(folder))
    except ModuleNotFoundError as exc:  # imported inside a block: named as one at module level is
        if exc.name:
            raise GpuModeError(folder / "reference.py", *missing_text([exc.name.split(".", 1)[0]])) from None
        raise GpuModeError(folder / "reference.py", f"running it failed: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # the task's own error, reported with its name
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
    from_task: bool = True
    """The task's own rule (ProblemSpec.tolerance_as_stated), not one given to the importer."""


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
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "check_implementation" for t in node.targets
        ):
            target = node.value
    found: set[tuple[float, float, bool]] = set()
    other: list[str] = []
    for call in ast.walk(target) if target is not None else []:
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        if name in (
            "make_match_reference",
            "match_reference",
            "verbose_allclose",
            "allclose",
            "isclose",
            "assert_close",
        ):
            positional = call.args[2:4] if name in ("verbose_allclose", "allclose", "isclose", "assert_close") else []
            rtol = _literal(keywords.get("rtol", positional[0] if positional else None))
            atol = _literal(keywords.get("atol", positional[1] if len(positional) > 1 else None))
            if (
                ("rtol" in keywords and rtol is None)
                or ("atol" in keywords and atol is None)
                or any(k not in ("rtol", "atol", "max_print", "reference", "equal_nan") for k in keywords)
            ):
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
        isinstance(n, ast.Name) and n.id == "ref_kernel" for n in ast.walk(target)
    )
    if found and not other and not calls_reference:
        found = set()  # closeness to something other than ref_kernel's output: its own logic
    if target is None or not found or other or len(found) > 1:
        why = (
            ("its checks cannot be read as one tolerance: " + "; ".join(other))
            if other
            else (
                "it applies different tolerances"
                if len(found) > 1
                else "it judges by its own logic, not by closeness to ref_kernel's output"
            )
        )
        return Rule(
            0.0,
            0.0,
            False,
            f"the task's own check_implementation, run by gpuarena's supervisor on every checked output ({why})",
            checker=True,
        )
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
