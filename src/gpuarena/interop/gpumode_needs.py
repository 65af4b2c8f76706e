"""GPU MODE tasks whose reference.py imports a package not installed here (see
interop/gpumode.py). They are refused before any of the task's code runs, naming the package: a
gpuarena problem declares no packages of its own (problem.toml has no such field), so a problem
imported where the package is installed would fail, unexplained, wherever it is not (GPU MODE's
amd_202602 tasks import AMD's `aiter`, a ROCm library)."""

from __future__ import annotations

import ast
import importlib.util

_OWN_MODULES = ("task", "utils", "reference", "submission")
"""The modules a task folder brings itself (GPU MODE's eval puts them beside each other)."""


def missing_modules(source: str) -> list[str]:
    """The top-level packages that reference.py imports at module level and this Python cannot
    find, in order; the task's own files (task, utils) are not among them."""
    missing: list[str] = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".", 1)[0]
            if top in _OWN_MODULES or top in missing:
                continue
            try:
                found = importlib.util.find_spec(top) is not None
            except (ImportError, ValueError):
                found = False
            if not found:
                missing.append(top)
    return missing


def missing_text(names: list[str]) -> tuple[str, str]:
    """The refusal of a task whose reference.py imports packages not installed here, and its fix."""
    listed = ", ".join(f"`{n}`" for n in names)
    return (
        f"reference.py imports {listed}, not installed here: a gpuarena problem declares no packages of "
        "its own, so its reference would fail wherever they are missing; nothing of the task was run",
        f"import it where {listed} {'is' if len(names) == 1 else 'are'} installed (the task's own GPU "
        "machine), with --check-device cuda",
    )
