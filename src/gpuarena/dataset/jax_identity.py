"""A JAX problem's identity from its source (issue 48): binding JAX primitives inside this process
next to PyTorch's fake tensors was reported to crash it, and a harvested JAX reference is its
equations written out, so its text already is its graph.

The reference's body is parsed; its parameters are renamed by first use (in0, in1...), its
locals by assignment (v0, v1...); the inputs' dtypes and strides come from INPUTS and their shapes
from each workload's axes (`{name}_{d}`, as the harvester writes them). The family key leaves out
the shapes and the integers of the equations' shape parameters (`shape=`, `new_sizes=`...,
which a JAX reference fixes where a PyTorch one reads its inputs' sizes).
"""

from __future__ import annotations

import ast
from typing import Any, cast

from gpuarena.dataset.keys import Identity, digest
from gpuarena.problems.loader import Problem

SHAPE_PARAMETERS = frozenset(
    {"shape", "new_sizes", "sizes", "start_indices", "limit_indices", "slice_sizes", "dimensions", "padding_config"}
)
"""Keyword parameters of jax.lax primitives that hold sizes."""


class _Rename(ast.NodeTransformer):
    def __init__(self, parameters: list[str]) -> None:
        self.parameters = set(parameters)
        self.names: dict[str, str] = {}
        self.order: list[str] = []

    def visit_Name(self, node: ast.Name) -> ast.AST:
        name = node.id
        if name == "S":  # jax_source's sizes, named as such
            return node
        if name not in self.names:
            if name in self.parameters:
                self.names[name] = f"in{len(self.order)}"
                self.order.append(name)
            elif isinstance(node.ctx, ast.Store):
                self.names[name] = f"v{len(self.names) - len(self.order)}"
            else:
                return node  # jax, jnp: module names
        return ast.copy_location(ast.Name(id=self.names[name], ctx=node.ctx), node)


class _Sizes(ast.NodeTransformer):
    """Integers inside shape parameters, and the recorded shapes `_sizes` scales them from, become
    one placeholder."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in ("_sizes", "S"):  # jax_source.S
            return _blank(node, float)
        return self.generic_visit(node)

    def visit_keyword(self, node: ast.keyword) -> ast.AST:
        if node.arg in SHAPE_PARAMETERS:
            return ast.keyword(arg=node.arg, value=cast(ast.expr, _blank(node.value)))
        return self.generic_visit(node)


def _blank(node: ast.AST, *kinds: type) -> ast.AST:
    """node with its integers (and constants of these kinds) as one placeholder."""

    class Blank(ast.NodeTransformer):
        def visit_Constant(self, const: ast.Constant) -> ast.AST:
            number = isinstance(const.value, (int, *kinds)) and not isinstance(const.value, bool)
            return ast.Constant("?") if number else const

    return Blank().visit(node)


def _reference(tree: ast.Module) -> ast.FunctionDef | None:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "reference":
            return node
    return None


def _inputs_spec(tree: ast.Module) -> dict[str, Any]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "INPUTS" for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return {}
            return value if isinstance(value, dict) else {}
    return {}


def renamed(function: ast.FunctionDef) -> tuple[list[ast.stmt], list[str]]:
    """The reference's body with its parameters renamed by first use (in0, in1...) and its locals
    by assignment (v0, v1...), and the parameters in that order."""
    renamer = _Rename([a.arg for a in function.args.args])
    body = [renamer.visit(ast.fix_missing_locations(statement)) for statement in function.body]
    return body, renamer.order + [a.arg for a in function.args.args if a.arg not in renamer.order]


def family_text(body: list[ast.stmt]) -> str:
    """The renamed body with its sizes blanked: what the family key reads."""
    return "\n".join(ast.dump(_Sizes().visit(s)) for s in ast.parse("\n".join(ast.unparse(s) for s in body)).body)


def jax_identity(problem: Problem) -> Identity:
    """A JAX problem's keys, read from its reference.py without running it."""
    spec = problem.spec
    tree = ast.parse(problem.reference_source)
    function = _reference(tree)
    if function is None:
        name = f"unparsed:{problem.id}"
        return Identity(problem.id, spec.level, "jax", name, name, error="no reference function in reference.py")
    body, order = renamed(function)
    inputs = _inputs_spec(tree)
    layout = tuple((inputs.get(n, {}).get("dtype"), inputs.get(n, {}).get("stride")) for n in order)
    ranks = tuple(inputs.get(n, {}).get("rank") for n in order)
    shapes = sorted(
        {
            (
                w.dtype,
                tuple(tuple(w.axes.get(f"{n}_{d}", -1) for d in range(ranks[i] or 0)) for i, n in enumerate(order)),
            )
            for w in spec.workloads
        }
    )
    exact_body = "\n".join(ast.dump(s) for s in body)
    exact = digest(("jax", exact_body, layout, shapes))
    family = digest(("jax", family_text(body), layout, ranks, sorted({w.dtype for w in spec.workloads})))
    return Identity(problem.id, spec.level, "jax", exact, family, order)
