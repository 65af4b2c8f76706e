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


PACKAGE_FLOORS = {
    # the ground floor: records and wire types as values, errors, small helpers without a floor above
    "gpuarena": 0,
    "contracts": 0,
    "errors": 0,
    "cache": 0,
    "bundled": 0,
    "stack": 0,
    "jax_bridge": 0,
    "host_devices": 0,
    # formats: problems and solutions as files
    "problems": 1,
    "solutions": 1,
    # the judge
    "harness": 2,
    # the library's features over the judge
    "interop": 3,
    "migration": 3,
    "suite": 3,
    "contests": 3,
    "dataset": 3,
    "scaffold": 3,
    "redteam": 3,
    "solution_readers": 3,
    "language_check": 3,
    "runner_wire": 3,
    "schemas": 3,
    # the faces
    "client": 4,
    "runner": 4,
    "service": 4,
    "cli": 4,
    "__main__": 4,
}
"""Each top-level package or module of gpuarena on its floor (docs/architecture.md): a module may
import its own floor and those below, never above; a new package must be given a floor here."""


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    folded: dict[str, set[str]] = {}
    for module, imports in graph.items():
        mine = folded.setdefault(package_of(module), set())
        mine.update(package_of(i) for i in imports if package_of(i) != package_of(module))
    return folded


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a package's modules to a package on a higher floor (type-only ones too)."""
    return sorted(
        f"{module} imports {imported}"
        for module, imports in graph.items()
        for imported in imports
        if PACKAGE_FLOORS[package_of(imported)] > PACKAGE_FLOORS[package_of(module)]
    )


def test_every_package_is_on_a_floor():
    assert set(package_graph(import_graph())) == set(PACKAGE_FLOORS)


def test_an_upward_import_is_found():
    graph = {"gpuarena.problems.check": {"gpuarena.harness.compare"}, "gpuarena.harness.judge": {"gpuarena.errors"}}
    assert upward_imports(graph) == ["gpuarena.problems.check imports gpuarena.harness.compare"]


def test_packages_import_only_downwards_and_in_no_circle():
    """contracts -> formats -> harness -> features -> faces (issue 50): the package graph, folded
    from every module's imports, has no circle and no import up a floor."""
    graph = import_graph()
    assert upward_imports(graph) == []
    assert circles(package_graph(graph)) == []


FACES = {"service", "runner", "cli", "__main__"}
"""The faces over the library. Each stands alone but the CLI, which composes them (`gpuarena
serve` is the service with a runner: cli/serve.py); client.py, the service API's client, is what
the runner and the CLI share."""


def faces_importing_faces(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} imports {imported}"
        for module, imports in graph.items()
        for imported in imports
        if package_of(module) in FACES - {"cli", "__main__"}
        and package_of(imported) in FACES
        and package_of(imported) != package_of(module)
    )


def test_a_face_imports_no_other_face_but_the_cli_composes_them():
    assert faces_importing_faces(import_graph()) == []
    made_up = {"gpuarena.service.server": {"gpuarena.runner.agent"}, "gpuarena.cli.serve": {"gpuarena.runner.agent"}}
    assert faces_importing_faces(made_up) == ["gpuarena.service.server imports gpuarena.runner.agent"]


SHARED = {
    "protocol",
    "transport",
    "cuda_vmm",
    "proctree",
    "stats",
    "phases",
    "redact",
    "options",
    "compare",
    "precision",
    "failure",
}
"""The helpers both sides of the socket use, at the harness's root (the records and the
worker's messages they carry are contracts/, the ground floor)."""
TOP = {"judge", "evaluator"}
"""The entry points: they may import every floor, and nothing in the harness imports them."""
FLOORS_BELOW = {
    "shared": {"shared"},
    "device": {"shared", "device"},
    "inside": {"shared", "device", "inside"},
    "launch": {"shared", "device", "inside", "launch"},
    "supervisor": {"shared", "device", "inside", "launch", "supervisor"},
    "profile": {"shared", "device", "inside", "launch", "supervisor", "profile"},
    "top": {"shared", "device", "inside", "launch", "supervisor", "profile", "top"},
}
"""What each floor may import: its own floor and those below it (docs/harness.md)."""


def floor(module: str) -> str:
    """The floor of a harness module: its folder, or shared / top / supervisor at the root."""
    parts = module.removeprefix("gpuarena.harness.").split(".")
    if len(parts) > 1:
        return parts[0]
    if parts[0] in SHARED:
        return "shared"
    return "top" if parts[0] in TOP else "supervisor"


def floor_breaches(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, imports in graph.items():
        if not module.startswith("gpuarena.harness.") or module.count(".") == 1 and module.endswith("__init__"):
            continue
        for imported in imports:
            if imported.startswith("gpuarena.harness.") and floor(imported) not in FLOORS_BELOW[floor(module)]:
                found.append(f"{module} ({floor(module)}) imports {imported} ({floor(imported)})")
    return sorted(found)


def test_a_breach_of_the_floors_is_found():
    graph = {
        "gpuarena.harness.inside.worker": {"gpuarena.harness.launch.process", "gpuarena.contracts.records"},
        "gpuarena.harness.device.timing": {"gpuarena.harness.device.block"},
        "gpuarena.harness.compare": {"gpuarena.harness.supervisor"},
    }
    assert floor_breaches(graph) == [
        "gpuarena.harness.compare (shared) imports gpuarena.harness.supervisor (supervisor)",
        "gpuarena.harness.inside.worker (inside) imports gpuarena.harness.launch.process (launch)",
    ]


def test_the_harness_imports_only_downwards_by_floor():
    assert floor_breaches(import_graph()) == []


def test_every_harness_module_is_on_a_known_floor():
    folders = {p.name for p in (PACKAGE / "harness").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == {"device", "inside", "launch", "profile"}


def test_a_worker_is_started_ahead_before_torch_or_pydantic_is_imported():
    """`gpuarena run` starts its worker before importing anything heavy (launch/started.py): the
    typed messages (pydantic: 70 ms on the 2-core VM, before the worker's start) load only once
    the first request is made."""
    import subprocess
    import sys

    probe = "import sys, gpuarena.harness.launch.started; print(sorted({'torch', 'pydantic'} & set(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
