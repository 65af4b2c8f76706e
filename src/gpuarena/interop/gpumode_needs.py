"""The packages a GPU MODE task's files import (see interop/gpumode.py).

An imported problem declares them in problem.toml's `requires` (required_packages), so that
wherever one is missing, `gpuarena check` and `gpuarena run` stop naming it before any of the
task's code runs, instead of failing on the import unexplained. A task whose packages are not
installed where it is imported is refused before any of its code runs, naming them
(missing_modules): its inputs, buffers and outputs are learned only by running generate_input
and ref_kernel, and GPU MODE's amd_202602 tasks need AMD's `aiter` (a ROCm library) for both,
so there is nothing true to write about them here; imported where the package is installed,
they are written with it in `requires`."""

from __future__ import annotations

import ast
import importlib.util
import sys

_OWN_MODULES = ("task", "utils", "reference", "submission")
"""The modules a task folder brings itself (GPU MODE's eval puts them beside each other)."""
_BROUGHT = ("torch", "numpy")
"""Packages every gpuarena install has (its own dependencies), never worth declaring."""
DEVICE_OF = {"aiter": "AMD's ROCm kernel library, for AMD Instinct GPUs"}
"""Vendor packages that say which GPU a task needs: a refusal names it, so the user knows which
machine to import the task on (GPU MODE's amd_202602 tasks need aiter, on an MI355X)."""


def _imported(source: str) -> list[str]:
    """The top-level packages reference.py imports at module level, in order, once each, leaving
    out the task's own files (task, utils) and relative imports."""
    found: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if top not in _OWN_MODULES and top not in found:
                found.append(top)
    return found


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(source: str) -> list[str]:
    """The top-level packages that reference.py imports at module level and this Python cannot
    find, in order; the task's own files (task, utils) are not among them."""
    return [name for name in _imported(source) if not _installed(name)]


def required_packages(*sources: str) -> list[str]:
    """What problem.toml's `requires` says for a task with these files (reference.py, task.py,
    utils.py): the packages they import at module level that are neither Python's own nor
    gpuarena's (_BROUGHT), in order, once each."""
    found = [n for source in sources for n in _imported(source)]
    return [
        n for i, n in enumerate(found) if n not in found[:i] and n not in sys.stdlib_module_names and n not in _BROUGHT
    ]


def missing_text(names: list[str]) -> tuple[str, str]:
    """The refusal of a task whose reference.py imports packages not installed here, and its fix."""
    listed = ", ".join(f"`{n}`" for n in names)
    toml = ", ".join(f'"{n}"' for n in names)
    devices = "; ".join(f"`{n}` is {DEVICE_OF[n]}" for n in names if n in DEVICE_OF)
    named = f"{listed} ({devices})" if devices else listed
    return (
        f"reference.py imports {named}, not installed here: generate_input and ref_kernel cannot run, so "
        "the task's inputs, buffers and outputs are unknown here and no problem can be written (not even "
        "with --keep-failing); nothing of the task was run",
        f"import it where {listed} {'is' if len(names) == 1 else 'are'} installed (the task's own GPU "
        f"machine), with --check-device cuda: the problem is written with `requires = [{toml}]` in "
        "problem.toml, so `gpuarena check` and `gpuarena run` name the package wherever it is missing",
    )
