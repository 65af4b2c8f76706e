"""Picking a subset of problems, the same way on every command that takes many: by id pattern,
level, tag, the model an operator comes from, and the framework its reference is written in."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from gpuarena.errors import GpuarenaError
from gpuarena.problems.loader import Problem, load_problem


@dataclass(frozen=True)
class ProblemFilter:
    """Each given filter must hold (any of its values); a filter not given lets all through."""

    patterns: tuple[str, ...] = ()
    """Shell-style patterns of the id, e.g. 'level1/*'."""
    levels: tuple[int, ...] = ()
    tags: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    """Words of a model's name in the problem's provenance, any case ('llama' finds Llama-3.1-8B)."""
    frameworks: tuple[str, ...] = ()
    """The reference's framework (provenance.framework: pytorch, jax, ...)."""

    @classmethod
    def of(
        cls,
        patterns: list[str] | None = None,
        levels: list[int] | None = None,
        tags: list[str] | None = None,
        models: list[str] | None = None,
        frameworks: list[str] | None = None,
    ) -> ProblemFilter:
        return cls(
            tuple(patterns or ()), tuple(levels or ()), tuple(tags or ()), tuple(models or ()), tuple(frameworks or ())
        )

    def __bool__(self) -> bool:
        return any((self.patterns, self.levels, self.tags, self.models, self.frameworks))

    def admits(self, problem: Problem) -> bool:
        spec = problem.spec
        named = " ".join(spec.provenance.models).lower()
        framework = spec.provenance.framework.lower()
        return (
            (not self.patterns or any(fnmatch.fnmatchcase(problem.id, p) for p in self.patterns))
            and (not self.levels or spec.level in self.levels)
            and (not self.tags or bool(set(self.tags) & set(spec.tags)))
            and (not self.models or any(m.lower() in named for m in self.models))
            and (not self.frameworks or framework in {f.lower() for f in self.frameworks})
        )

    def admits_folder(self, folder: Path) -> bool:
        """Whether the problem in `folder` is admitted; one that does not load is (its check says why)."""
        try:
            return self.admits(load_problem(folder))
        except GpuarenaError:
            return True

    def describe(self) -> str:
        parts = [
            f"{name} {', '.join(map(str, values))}"
            for name, values in (
                ("id", self.patterns),
                ("level", self.levels),
                ("tag", self.tags),
                ("model", self.models),
                ("source", self.frameworks),
            )
            if values
        ]
        return "; ".join(parts) or "none"


def select(problems: list[Problem], where: ProblemFilter) -> list[Problem]:
    """The problems `where` admits; an error that names the filters when none is left."""
    chosen = [p for p in problems if where.admits(p)]
    if not chosen:
        raise GpuarenaError(
            f"no problem matches the filters ({where.describe()}): gpuarena list shows the "
            "problems with their levels and tags"
        )
    return chosen
