"""The constraints of a FlashInfer-Trace definition ("H_qo == H_kv * H_r"), evaluated over a
workload's axis sizes without running arbitrary code: only arithmetic, comparisons, and/or/not
and min/max/abs."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_OPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_CALLS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "abs": abs}


def evaluate_constraint(text: str, sizes: dict[str, int]) -> bool:
    """A constraint over axis sizes: arithmetic, comparisons, and/or/not, min/max/abs."""

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in sizes:
                raise ValueError(f"unknown axis {node.id!r}")
            return sizes[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 64:
                raise ValueError(f"exponent {right} is too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
            value = walk(node.operand)
            return -value if isinstance(node.op, ast.USub) else (not value if isinstance(node.op, ast.Not) else value)
        if isinstance(node, ast.BoolOp):
            values = [walk(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.Compare) and all(type(op) in _OPS for op in node.ops):
            left = walk(node.left)
            for op, right_node in zip(node.ops, node.comparators):
                right = walk(right_node)
                if not _OPS[type(op)](left, right):
                    return False
                left = right
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _CALLS
            and not node.keywords
        ):
            return _CALLS[node.func.id](*(walk(a) for a in node.args))
        raise ValueError(f"uses {type(node).__name__}")

    return bool(walk(ast.parse(text, mode="eval")))
