"""The language record and its registry (issue 50: registered, not sniffed): one module per
language in this package defines one `Language` and registers it; build.py, runtimes.py and the
self-tests (gpuarena/language_check.py) look languages up here.

Light on purpose: the supervisor reads the registry (which runtimes start ahead), so nothing here
or in a language's module imports torch or the language's own package at module level; builders,
start-ups and adapters import what they need when called, in the worker."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from gpuarena.solutions.model import Solution

Entry = Callable[..., Any]
Builder = Callable[["Solution", Path], Entry]
"""Turns a solution whose sources are written into the folder into its entry point."""


class BuildError(Exception):
    """The solution could not be built; the message is the compiler's or the importer's."""


@dataclass(frozen=True)
class Package:
    """The Python package a language needs beyond torch."""

    module: str
    """What the language imports (jax, tvm_ffi, cutlass)."""
    distribution: str
    """What to pip install (apache-tvm-ffi, nvidia-cutlass-dsl)."""
    version_from: tuple[str, ...] = ()
    """Distributions that carry the version where the named one is a meta-package that may be
    absent (nvidia-cutlass-dsl's libraries installed without it)."""

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None


@dataclass(frozen=True)
class SelfTest:
    """A tiny program in the language for a tiny problem, judged by the real harness when a
    runner starts (gpuarena/language_check.py): that the language works on a device, end to end."""

    sources: dict[str, str]
    entry_point: str = "solve.py:solve"
    devices: tuple[str, ...] = ("cpu", "cuda")
    """The device types ("cpu", "cuda") it runs on; elsewhere it is skipped."""
    problem: str = "level1/add"
    """A bundled problem, and its one workload to run (in test mode)."""
    workload: str = "small-64k"
    unavailable: Callable[[str], str] | None = None
    """Why it cannot run on this device type here, beyond the package ("" when it can)."""


@dataclass(frozen=True)
class Language:
    name: str
    """As solution.toml names it."""
    builder: Builder
    self_test: SelfTest
    package: Package | None = None
    """None: runs on torch alone."""
    start: Callable[[torch.device], None] | None = None
    """Brings the runtime up on a device as the harness's own work, before the solution is
    imported (its threads are then the harness's: runtimes.py); None: not started ahead."""
    adapter: Callable[[Entry, list[str]], Entry] | None = None
    """Wraps the built entry so that the harness calls it as every solution: torch tensors in,
    torch tensors out (JAX's arrays cross here); None: called as built."""


_LANGUAGES: dict[str, Language] = {}


def register(language: Language) -> Language:
    """Add a language (again under the same name: replaces it); returns it, as registered."""
    _LANGUAGES[language.name] = language
    return language


def get(name: str) -> Language | None:
    """The registered language of that name, None for one that is not a kernel language."""
    return _LANGUAGES.get(name)


def registered() -> list[Language]:
    """Every registered language, in the order registered."""
    return list(_LANGUAGES.values())


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


def build_python(solution: Solution, folder: Path) -> Entry:
    """A Python solution's entry: its file imported under a name of its own, the function read."""
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
