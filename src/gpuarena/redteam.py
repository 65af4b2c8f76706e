"""Running the red-team corpus: exploit solutions that must never pass, honest ones that must.

Each case is a solution file with literal metadata at module level, read with `ast` (a case
is hostile code: the supervisor never imports it):

    FAMILY = "cached outputs"         # the exploit family
    EXPECT = ["WRONG_VALUES"]         # acceptable verdicts (honest cases: ["PASSED"])
    PROBLEM = "level1/softmax"        # optional; a bundled id or a folder
    DEVICES = ["cpu", "cuda"]         # optional; where the case applies
    MODE = "benchmark"                # optional
    WORKLOADS = ["small-64x1000"]     # optional
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "PROBLEM": "level1/softmax",
    "DEVICES": ["cpu", "cuda"],
    "MODE": "benchmark",
    "WORKLOADS": None,
    "TIMEOUT": 60.0,
}


@dataclass
class Case:
    path: Path
    family: str
    expect: list[str]
    problem: str
    devices: list[str]
    mode: str
    workloads: list[str] | None
    timeout: float
    honest: bool = False

    @property
    def name(self) -> str:
        return self.path.stem if self.path.is_file() else self.path.name


@dataclass
class Outcome:
    case: Case
    got: str
    reason: str
    ok: bool
    details: dict[str, Any] = field(default_factory=dict)


def read_metadata(path: Path) -> dict[str, Any]:
    """Top-level literal assignments of the case's main file, without running it."""
    main = path / "solve.py" if path.is_dir() else path
    tree = ast.parse(main.read_text(), filename=str(main))
    found: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name.isupper():
                try:
                    found[name] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return found


def load_cases(corpus: Path) -> list[Case]:
    cases = []
    for path in sorted(p for p in corpus.rglob("*.py") if p.parent.name != "__pycache__" and not p.name.startswith("_")):
        meta = {**DEFAULTS, **read_metadata(path)}
        if "FAMILY" not in meta or "EXPECT" not in meta:
            raise ValueError(f"{path}: a red-team case needs FAMILY and EXPECT at module level")
        expect = [meta["EXPECT"]] if isinstance(meta["EXPECT"], str) else list(meta["EXPECT"])
        cases.append(Case(path=path, family=meta["FAMILY"], expect=expect, problem=meta["PROBLEM"],
                          devices=list(meta["DEVICES"]), mode=meta["MODE"], workloads=meta["WORKLOADS"],
                          timeout=float(meta["TIMEOUT"]), honest=expect == ["PASSED"]))
    return cases


def run_case(case: Case, device: str, budget_s: float = 0.3) -> Outcome:
    from gpuarena.harness.supervisor import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    problem = resolve_problem(case.problem)
    workloads = case.workloads
    if workloads is None:
        kind = "cuda" if device.startswith("cuda") else "cpu"
        workloads = [w.name for w in problem.spec.workloads_for(kind)][:1]
    options = RunOptions(device=device, mode=case.mode, timeout_s=case.timeout, budget_s=budget_s, workloads=workloads)
    record = evaluate(problem, load_solution(case.path), options)
    got = record.status.value
    return Outcome(case=case, got=got, reason=record.reason, ok=got in case.expect,
                   details={"score": record.score, "workloads": [w.name for w in record.workloads]})
