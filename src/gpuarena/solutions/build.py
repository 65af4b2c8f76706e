"""Turning a Solution into a callable, one builder per language. Runs in the worker only."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpuarena.cache import cache_dir
from gpuarena.solutions import runtimes
from gpuarena.solutions.model import Solution


class BuildError(Exception):
    """The solution could not be built; the message is the compiler's or the importer's."""


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


def _compiled_sources(solution: Solution) -> tuple[Path, list[Path]]:
    """The C++/CUDA sources copied beside the solution's build folder: at a path that is the
    same in every run, left as they are when unchanged. ninja rebuilds when a command (which
    names the paths) or a source's time changes, and a kept build (harness/launch/build_cache.py) is
    then up to date."""
    build_dir = cache_dir() / "builds" / solution.hash[:24]
    build_dir.mkdir(parents=True, exist_ok=True)
    folder = build_dir / "sources"
    write_sources(solution, folder, unchanged_kept=True)
    compiled = [folder / name for name in solution.sources if name.endswith((".cu", ".cpp", ".cc", ".cxx"))]
    if not compiled:
        raise BuildError(f"a {solution.manifest.language} solution needs at least one .cu or .cpp source")
    return build_dir, compiled


def _module_name(solution: Solution) -> str:
    return "gpuarena_" + hashlib.sha256(solution.hash.encode()).hexdigest()[:16]


def _compile(load: Callable[..., Any], solution: Solution, **extra: Any) -> Any:
    """The solution's C++/CUDA sources built and loaded by a builder (torch's or TVM-FFI's), with
    the same name, flags and folders for both; a failure is the compiler's own message."""
    build_dir, compiled = _compiled_sources(solution)
    options = solution.manifest.build
    try:
        return load(
            name=_module_name(solution),
            sources=[str(p) for p in compiled],
            extra_cflags=["-O3", *options.extra_cflags],
            extra_cuda_cflags=options.extra_cuda_cflags,
            extra_ldflags=options.extra_ldflags,
            extra_include_paths=[str(build_dir / "sources")],
            build_directory=str(build_dir),
            **extra,
        )
    except Exception as exc:  # the compiler's own message is in the exception text
        raise BuildError(str(exc)) from None


def _build_cuda(solution: Solution, folder: Path) -> Callable[..., Any]:
    from torch.utils.cpp_extension import load

    module = _compile(load, solution, verbose=False)
    entry = getattr(module, solution.manifest.entry_point, None)
    if not callable(entry):
        raise BuildError(f"the built module exports no {solution.manifest.entry_point}()")
    return entry


def _build_tvm_ffi(solution: Solution, folder: Path) -> Callable[..., Any]:
    """C++/CUDA exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC and built with TVM-FFI's own builder,
    as FlashInfer-Bench builds its contest's CUDA solutions. Called with torch tensors (TVM-FFI
    takes them through DLPack, on torch's current stream); a tensor it allocates with the
    environment's allocator is a torch tensor."""
    import torch
    import tvm_ffi.cpp

    if any(name.endswith(".cu") for name in solution.sources) and torch.cuda.is_available():
        # for the GPU the solution runs on (TVM-FFI would ask nvidia-smi for the first one's)
        major, minor = torch.cuda.get_device_capability()
        os.environ.setdefault("TVM_FFI_CUDA_ARCH_LIST", f"{major}.{minor}")
    module = _compile(tvm_ffi.cpp.load, solution)
    try:
        return module[solution.manifest.entry_point]
    except Exception:
        raise BuildError(
            f"the built module exports no {solution.manifest.entry_point}() "
            "(export it with TVM_FFI_DLL_EXPORT_TYPED_FUNC)"
        ) from None


BUILDERS: dict[str, Callable[[Solution, Path], Callable[..., Any]]] = {
    "pytorch": _build_python,
    "triton": _build_python,
    "cuda": _build_cuda,
    "jax": _build_python,
    "tvm-ffi": _build_tvm_ffi,
    "tilelang": _build_python,
    "cute-dsl": _build_python,
}


def build(solution: Solution, folder: Path, destinations: Sequence[str] = ()) -> Callable[..., Any]:
    """Write the sources into folder and return the solution's entry point, called as every
    solution is: torch tensors in (the inputs, then the destinations where the problem passes
    them), torch tensors out. destinations: the problem's output names where it passes them."""
    language = solution.manifest.language
    if language not in BUILDERS:
        raise BuildError(
            f"a {language} solution is not a kernel: submit it to a migration target (an app "
            "problem), not to a kernel problem (docs/migration.md)"
        )
    try:
        runtimes.require(language)
    except runtimes.MissingPackage as exc:
        raise BuildError(str(exc)) from None
    write_sources(solution, folder)
    return runtimes.adapt(language, BUILDERS[language](solution, folder), list(destinations))
