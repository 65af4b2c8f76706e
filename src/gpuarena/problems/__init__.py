"""Problems: folders with problem.toml and reference.py; loading, validation, inputs."""

from gpuarena.problems.loader import Problem, load_problem, resolve_problem
from gpuarena.problems.model import ProblemSpec, Tolerance, Workload

__all__ = ["Problem", "ProblemSpec", "Tolerance", "Workload", "load_problem", "resolve_problem"]
