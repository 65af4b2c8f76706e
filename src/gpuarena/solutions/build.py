"""Turning a Solution into a callable, by its language's builder (solutions/languages/: one
module per language, registered). Runs in the worker only."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpuarena.solutions import languages, runtimes
from gpuarena.solutions.languages.base import BuildError, write_sources
from gpuarena.solutions.model import Solution

__all__ = ["BuildError", "build", "write_sources"]


def build(solution: Solution, folder: Path, destinations: Sequence[str] = ()) -> Callable[..., Any]:
    """Write the sources into folder and return the solution's entry point, called as every
    solution is: torch tensors in (the inputs, then the destinations where the problem passes
    them), torch tensors out. destinations: the problem's output names where it passes them."""
    language = languages.get(solution.manifest.language)
    if language is None:
        raise BuildError(
            f"a {solution.manifest.language} solution is not a kernel: submit it to a migration target (an app "
            "problem), not to a kernel problem (docs/migration.md)"
        )
    try:
        runtimes.require(language.name)
    except runtimes.MissingPackage as exc:
        raise BuildError(str(exc)) from None
    write_sources(solution, folder)
    return runtimes.adapt(language.name, language.builder(solution, folder), list(destinations))
