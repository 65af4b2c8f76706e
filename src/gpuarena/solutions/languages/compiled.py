"""What the languages built from C++/CUDA sources share (cuda.py: torch's extensions; tvm_ffi.py:
TVM-FFI's builder): the sources copied to a stable folder, and the one call that compiles them."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuarena.cache import cache_dir
from gpuarena.solutions.languages.base import BuildError, write_sources

if TYPE_CHECKING:
    from gpuarena.solutions.model import Solution


def compiled_sources(solution: Solution) -> tuple[Path, list[Path]]:
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


def module_name(solution: Solution) -> str:
    return "gpuarena_" + hashlib.sha256(solution.hash.encode()).hexdigest()[:16]


def compile_sources(load: Callable[..., Any], solution: Solution, **extra: Any) -> Any:
    """The solution's C++/CUDA sources built and loaded by a builder (torch's or TVM-FFI's), with
    the same name, flags and folders for both; a failure is the compiler's own message."""
    build_dir, compiled = compiled_sources(solution)
    options = solution.manifest.build
    try:
        return load(
            name=module_name(solution),
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
