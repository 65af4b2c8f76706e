"""A problem whose workloads only fit a GPU is a problem (issue 49): imported on a machine without
one, it is written marked `unchecked = ["cuda"]`, never refused, never told to be edited, and its
first run on a GPU checks it (problem_pending.py; tests/test_problem_pending.py runs that path).
Before, a FlashInfer-Trace definition too large for the CPU was written as if it had been
checked, with a note asking the user to add a CPU workload to a problem.toml they never wrote."""

from __future__ import annotations

import json
from pathlib import Path

from gpuarena.harness.problem_pending import pending
from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.problems import load_problem

from .conftest import RMSNORM


def test_a_definition_too_large_for_the_cpu_imports_marked_unchecked_on_the_gpu(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GPUARENA_CACHE", str(tmp_path / "cache"))
    definition = json.loads((RMSNORM / "definition.json").read_text())
    definition["name"] = "rmsnorm_huge"
    definition["axes"]["hidden_size"]["value"] = (1 << 24) + 256  # one row is over the CPU's cap
    (tmp_path / "definition.json").write_text(json.dumps(definition))
    rows = (RMSNORM / "workloads.jsonl").read_text().replace("rmsnorm_h256", "rmsnorm_huge")
    (tmp_path / "workloads.jsonl").write_text(rows)
    result = import_definition(tmp_path / "definition.json", tmp_path / "workloads.jsonl", tmp_path / "out")
    problem = load_problem(result.folder)
    assert problem.spec.unchecked == ["cuda"]
    assert all(w.devices == ["cuda"] for w in problem.spec.workloads)
    assert pending(problem, "cuda") and not pending(problem, "cpu")
    said = " ".join(result.notes)
    assert "checked by its first run on a GPU" in said and "add one to problem.toml" not in said
