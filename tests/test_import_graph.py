"""The package's modules import one another in one direction: no circles, counting imports made
inside functions too (a lazy import only hides a circle) and imports for type annotations alone
(under `if TYPE_CHECKING:`): they never run, but a module that names another's type depends on
it as surely (the run's phases now name harness/run_context.py's RunContext, not the
Supervisor that imports them; the backends name block.py's BlockTimer, not the Timer)."""

from __future__ import annotations

import ast
from pathlib import Path

import gpuarena

PACKAGE = Path(gpuarena.__file__).parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (a name imported from a package counts as
    its submodule where one of that name exists)."""
    files = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in files}
    for module, path in files.items():
        for node in ast.parse(path.read_text()).body:
            for found in ast.walk(node):
                if isinstance(found, ast.ImportFrom) and found.module and found.module.startswith("gpuarena"):
                    for alias in found.names:
                        sub = f"{found.module}.{alias.name}"
                        graph[module].add(sub if sub in files else found.module)
                elif isinstance(found, ast.Import):
                    graph[module].update(a.name for a in found.names if a.name in files)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in graph:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_package_has_no_import_circles():
    assert circles(import_graph()) == []
