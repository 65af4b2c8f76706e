"""Solutions: loading, packing and content hashing; each language (its builder, runtime, self-test) in languages/."""

from gpuarena.solutions.loader import load_solution
from gpuarena.solutions.model import BuildOptions, Solution, SolutionManifest

__all__ = ["BuildOptions", "Solution", "SolutionManifest", "load_solution"]
