"""`gpuarena new`: starting points that pass out of the box."""

from __future__ import annotations

from pathlib import Path

from gpuarena.errors import GpuarenaError
from gpuarena.problems.loader import Problem

PROBLEM_TOML = """name = "{name}"
level = {level}
summary = "y = x * scale + bias, with a per-column scale and bias (replace with your operator)."
tags = ["elementwise"]
weight = 1.0
convention = "return"
outputs = ["y"]
bytes = "(2 * rows * cols + 2 * cols) * dtype_bytes"
flops = "2 * rows * cols"

[provenance]
framework = "pytorch"
operator = "torch.addcmul"
models = []

[[workloads]]
name = "small"
axes = {{ rows = 64, cols = 256 }}
dtype = "float32"
devices = ["cpu", "cuda"]

[[workloads]]
name = "medium"
axes = {{ rows = 512, cols = 1024 }}
dtype = "float32"
devices = ["cpu", "cuda"]

[[workloads]]
name = "large-bf16"
axes = {{ rows = 16384, cols = 4096 }}
dtype = "bfloat16"
devices = ["cuda"]
"""

REFERENCE_PY = '''"""Reference for {name}: the trusted definition of the operator."""

import torch


def reference(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (x.float() * scale.float() + bias.float()).to(x.dtype)


def make_inputs(axes: dict, dtype: torch.dtype, device: torch.device, generator: torch.Generator) -> dict:
    rows, cols = axes["rows"], axes["cols"]

    def draw(*shape):
        # random scale and offset: no trivial answer (zeros, a constant) can pass
        s = 0.5 + torch.rand((), generator=generator, device=device)
        o = torch.randn((), generator=generator, device=device)
        return (torch.randn(*shape, generator=generator, device=device) * s + o).to(dtype)

    return {{"x": draw(rows, cols), "scale": draw(cols), "bias": draw(cols)}}
'''

README_MD = """# {name}

`y = x * scale + bias`: a starting point made by `gpuarena new problem`. Replace the
operator in `reference.py`, the shapes in `problem.toml`, and this description; then run
`gpuarena check {folder}`.
"""

SOLUTION_PY = {
    "pytorch": '''"""A first solution for {problem}: it calls the reference's own math. Make it faster."""

import torch


def solve({params}):
{body}
''',
    "triton": '''"""A Triton solution for {problem}. Replace the body with your kernel; runs on the CPU with TRITON_INTERPRET=1."""

import torch
import triton  # noqa: F401  (marks this solution as Triton)
import triton.language as tl  # noqa: F401


def solve({params}):
{body}
''',
    "jax": '''"""A JAX solution for {problem}: solve() takes the inputs as JAX arrays (passed without a copy)
and returns the outputs as JAX arrays. As written it passes by running the reference's own math
in PyTorch on the same memory (DLPack, no copy); replace _reference_math with jax.numpy, drop the
crossing and put @jax.jit on solve: it then compiles once per shape, before any timed call
(examples/softmax/jax.py)."""

import jax
import jax.numpy as jnp  # noqa: F401
import torch


def _reference_math({params}):
{body}


def solve({params}):
    outputs = _reference_math(*(_to_torch(value) for value in ({params},)))
    if isinstance(outputs, tuple):
        return tuple(jax.dlpack.from_dlpack(o.contiguous()) for o in outputs)
    return jax.dlpack.from_dlpack(outputs.contiguous())


def _to_torch(value):
    return torch.from_dlpack(value) if isinstance(value, jax.Array) else value
''',
}


def write_problem(folder: Path, level: int) -> Path:
    if level not in (1, 2, 3, 4):
        raise GpuarenaError("--level must be 1, 2, 3 or 4")
    if folder.exists() and any(folder.iterdir()):
        raise GpuarenaError(f"{folder} already exists and is not empty; choose a new folder")
    name = folder.name.lower().replace(" ", "_")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "problem.toml").write_text(PROBLEM_TOML.format(name=name, level=level))
    (folder / "reference.py").write_text(REFERENCE_PY.format(name=name))
    (folder / "README.md").write_text(README_MD.format(name=name, folder=folder))
    return folder


def write_solution(problem: Problem, path: Path, language: str) -> Path:
    if language not in SOLUTION_PY:
        raise GpuarenaError(
            f"--language must be one of {', '.join(SOLUTION_PY)}; CUDA and TVM-FFI solutions are "
            "folders (docs/formats.md)"
        )
    if path.exists():
        raise GpuarenaError(f"{path} exists; choose another file with -o")
    destination = problem.spec.convention == "destination" and language != "jax"  # JAX returns, always
    params = problem.input_names + (problem.spec.outputs if destination else [])
    if destination:
        lines = ["raise NotImplementedError('write the outputs into the given tensors')"]
    else:
        lines = _reference_body(problem.reference_source)
    text = SOLUTION_PY[language].format(
        problem=problem.id, params=", ".join(params), body="\n".join("    " + line if line else "" for line in lines)
    )
    helpers = _module_helpers(problem)
    if helpers:
        first = "\n\ndef _reference_math(" if language == "jax" else "\n\ndef solve("
        text = text.replace(first, f"\n\n{helpers}\n\n\n{first.lstrip()}", 1)
    path.write_text(text)
    return path


def _reference_body(source: str) -> list[str]:
    """The statements of reference() (without its docstring), dedented: solve()'s first body."""
    import ast
    import textwrap

    tree = ast.parse(source)
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "reference")
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
        body = body[1:]
    lines = source.splitlines()[body[0].lineno - 1 : function.end_lineno]
    return textwrap.dedent("\n".join(lines)).splitlines()


def _module_helpers(problem: Problem) -> str:
    """Module-level constants and helper functions the reference body relies on."""
    import ast

    tree = ast.parse(problem.reference_source)
    keep = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in ("reference", "make_inputs"):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "torch" for alias in node.names):
                continue
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant):
            continue
        keep.append(ast.get_source_segment(problem.reference_source, node))
    return "\n\n".join(k for k in keep if k)
