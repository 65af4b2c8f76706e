"""Solutions: loading, packing and content hashing; builders per language live in build.py."""

from gpuarena.solutions.loader import load_solution
from gpuarena.solutions.model import BuildOptions, Solution, SolutionManifest

__all__ = ["BuildOptions", "Solution", "SolutionManifest", "load_solution"]
