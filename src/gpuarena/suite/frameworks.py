"""Each framework's implementation of a problem, as a solution the harness judges like any other:
PyTorch eager is the problem's reference itself; torch.compile is that reference compiled. The
suite times these on a device, so the figures are the framework's, with the harness's timing."""

from __future__ import annotations

from gpuarena.errors import GpuarenaError
from gpuarena.problems.loader import Problem
from gpuarena.solutions.model import Solution, SolutionManifest

FRAMEWORKS = ("pytorch", "torch-compile", "jax")
WRITTEN_IN = {"pytorch": "pytorch", "torch-compile": "pytorch", "jax": "jax"}
"""The framework a problem's reference must be written in (provenance.framework) for the
framework to have an implementation of it: the reference itself, or compiled."""
ENTRY_FILE = "suite_entry.py"

_IMPLEMENTATION = {
    "pytorch": "implementation = reference",
    "torch-compile": "implementation = torch.compile(reference, dynamic=False)",
}


def implements(problem: Problem, framework: str) -> bool:
    """Whether the framework has its own implementation of the problem (its reference's framework)."""
    return WRITTEN_IN.get(framework) == problem.spec.provenance.framework


def framework_solution(problem: Problem, framework: str) -> Solution:
    """The problem's reference (and the Python files beside it) with a solve() that calls the
    framework's implementation; for a destination problem solve() copies the outputs into the
    destinations (for JAX the harness's JAX adapter does, as for any JAX solution)."""
    if framework not in WRITTEN_IN:
        raise GpuarenaError(f"framework {framework!r}: use one of {', '.join(FRAMEWORKS)}")
    if not implements(problem, framework):
        raise GpuarenaError(
            f"{problem.id}: its reference is written in {problem.spec.provenance.framework}, so "
            f"{framework} has no implementation of it"
        )
    sources = {
        p.relative_to(problem.path).as_posix(): p.read_text()
        for p in sorted(problem.path.glob("*.py"))
        if p.name != ENTRY_FILE
    }
    if framework == "jax":  # JAX arrays in and out: the reference is the solution
        sources[ENTRY_FILE] = (
            f'"""{problem.id} as JAX runs it (gpuarena suite)."""\n\n'
            "from reference import reference\n\nsolve = reference\n"
        )
        return Solution(
            name=f"{problem.id.replace('/', '-')}-jax",
            manifest=SolutionManifest(language="jax", entry_point=f"{ENTRY_FILE}:solve"),
            sources=sources,
        )
    outputs = problem.spec.outputs
    if problem.spec.convention == "destination":
        body = (
            f"def solve(*args):\n    inputs, destinations = args[:-{len(outputs)}], args[-{len(outputs)}:]\n"
            "    produced = implementation(*inputs)\n"
            "    produced = produced if isinstance(produced, (tuple, list)) else (produced,)\n"
            "    for destination, value in zip(destinations, produced):\n"
            "        destination.copy_(value)\n"
        )
    else:
        body = "def solve(*args):\n    return implementation(*args)\n"
    sources[ENTRY_FILE] = (
        f'"""{problem.id} as {framework} runs it (gpuarena suite)."""\n\nimport torch\n\n'
        f"from reference import reference\n\n{_IMPLEMENTATION[framework]}\n\n\n{body}"
    )
    return Solution(
        name=f"{problem.id.replace('/', '-')}-{framework}",
        manifest=SolutionManifest(language="pytorch", entry_point=f"{ENTRY_FILE}:solve"),
        sources=sources,
    )
