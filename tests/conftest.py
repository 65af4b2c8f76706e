"""Shared helpers: run a solution through the real harness (real worker processes) on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.databases import Templates

from gpuarena.contracts.records import Evaluation
from gpuarena.harness.judge import RunOptions, evaluate
from gpuarena.problems import load_problem, resolve_problem
from gpuarena.solutions import load_solution

pytest_plugins = ["tests.lanes"]

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SOLUTIONS = FIXTURES / "solutions"
EXAMPLES = ROOT / "examples"


def _share_the_cores() -> None:
    """Each of a lane's test processes (pytest-xdist) gets its share of the cores for torch's
    threads: two processes each running torch on every core fight over them, spinning (the
    dataset's whole CPU check: 168 s on the 2-core VM so, 53 s with one thread each). The
    harness's workers run on one thread already (worker_env.py)."""
    processes = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if processes > 1:
        import torch

        torch.set_num_threads(max(1, len(os.sched_getaffinity(0)) // processes))


_share_the_cores()


def judge(problem: str, solution: Path, **options) -> Evaluation:
    """Evaluate on the CPU; problem is a bundled id or a fixture name."""
    fixture = FIXTURES / "problems" / problem
    loaded = load_problem(fixture) if fixture.is_dir() else resolve_problem(problem)
    defaults = dict(device="cpu", mode="test", timeout_s=60.0, budget_s=0.3)
    defaults.update(options)
    return evaluate(loaded, load_solution(solution), RunOptions(**defaults))


def keep(name: str, record: Evaluation) -> None:
    """Keep a GPU test's record as an artifact, in GPUARENA_GPU_OUT where it is set."""
    out = os.environ.get("GPUARENA_GPU_OUT")
    if out:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / f"{name}.json").write_text(record.model_dump_json(indent=2))


@pytest.fixture
def softmax_small():
    """Judge a solution on level1/softmax's smallest workload (fast)."""

    def run(solution: Path, **options) -> Evaluation:
        options.setdefault("workloads", ["small-64x1000"])
        return judge("level1/softmax", solution, **options)

    return run


@pytest.fixture(scope="session")
def database_templates(tmp_path_factory) -> Iterator[Templates]:
    """Migrated databases that tests copy (tests/databases.py), made once per test process."""
    templates = Templates(tmp_path_factory.mktemp("database-templates"))
    yield templates
    templates.close()


def gpuarena(*args: str, cwd: Path = ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command line in a process of its own, as a user runs it (COLUMNS: rich's wrapping)."""
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "160", **(env or {})},
    )
