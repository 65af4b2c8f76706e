"""Solutions: loading, packing and content hashing; builders per language live in build.py."""

from gpuarena.solutions.model import BuildOptions, Solution, SolutionManifest
from gpuarena.solutions.loader import load_solution

__all__ = ["BuildOptions", "Solution", "SolutionManifest", "load_solution"]
