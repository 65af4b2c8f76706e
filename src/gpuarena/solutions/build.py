"""Turning a Solution into a callable, one builder per language. Runs in the worker only."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable

from gpuarena.solutions.model import Solution


class BuildError(Exception):
    """The solution could not be built; the message is the compiler's or the importer's."""


def cache_dir() -> Path:
    root = os.environ.get("GPUARENA_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gpuarena")
    return Path(root)


def write_sources(solution: Solution, folder: Path, unchanged_kept: bool = False) -> None:
    """unchanged_kept: leave a file that already holds the same text as it is (its time too)."""
    for name, text in solution.sources.items():
        target = (folder / name).resolve()
        if folder.resolve() not in target.parents:
            raise BuildError(f"source name {name!r} points outside the solution folder")
        if unchanged_kept and target.is_file() and target.read_text() == text:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def _build_python(solution: Solution, folder: Path) -> Callable[..., Any]:
    file, _, function = solution.manifest.entry_point.partition(":")
    function = function or "solve"
    # appended, not prepended: a solution file named triton.py must not shadow the package
    sys.path.append(str(folder))
    module_name = "gpuarena_solution_" + solution.hash[:12]
    spec = importlib.util.spec_from_file_location(module_name, folder / file)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot import {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    entry = getattr(module, function, None)
    if not callable(entry):
        raise BuildError(f"{file} defines no function {function}()")
    return entry


def _build_cuda(solution: Solution, folder: Path) -> Callable[..., Any]:
    from torch.utils.cpp_extension import load

    build_dir = cache_dir() / "builds" / solution.hash[:24]
    build_dir.mkdir(parents=True, exist_ok=True)
    # compiled from a copy beside the build, at a path that is the same in every run, left as
    # it is when unchanged: ninja rebuilds when a command (which names the paths) or a
    # source's time changes, and a kept build (harness/build_cache.py) is then up to date
    folder = build_dir / "sources"
    write_sources(solution, folder, unchanged_kept=True)
    compiled = [folder / name for name in solution.sources if name.endswith((".cu", ".cpp", ".cc", ".cxx"))]
    if not compiled:
        raise BuildError("a cuda solution needs at least one .cu or .cpp source")
    options = solution.manifest.build
    name = "gpuarena_" + hashlib.sha256(solution.hash.encode()).hexdigest()[:16]
    try:
        module = load(
            name=name,
            sources=[str(p) for p in compiled],
            extra_cflags=["-O3", *options.extra_cflags],
            extra_cuda_cflags=options.extra_cuda_cflags,
            extra_ldflags=options.extra_ldflags,
            extra_include_paths=[str(folder)],
            build_directory=str(build_dir),
            verbose=False,
        )
    except Exception as exc:  # the compiler's own message is in the exception text
        raise BuildError(str(exc)) from None
    entry = getattr(module, solution.manifest.entry_point, None)
    if not callable(entry):
        raise BuildError(f"the built module exports no {solution.manifest.entry_point}()")
    return entry


BUILDERS: dict[str, Callable[[Solution, Path], Callable[..., Any]]] = {
    "pytorch": _build_python,
    "triton": _build_python,
    "cuda": _build_cuda,
}


def build(solution: Solution, folder: Path) -> Callable[..., Any]:
    """Write the sources into folder and return the solution's entry point."""
    write_sources(solution, folder)
    return BUILDERS[solution.manifest.language](solution, folder)
