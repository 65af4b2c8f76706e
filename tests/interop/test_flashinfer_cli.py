"""`gpuarena import flashinfer`, `import flashinfer-solution`, `run`, `export traces`,
`export flashinfer` and `export solution` end to end, as a user types them (real subprocesses)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuarena.interop import flashinfer_reader, flashinfer_sidecar
from gpuarena.interop import flashinfer_trace as fit

from .conftest import INVALID, RMSNORM, ROOT

pytestmark = pytest.mark.e2e


def gpuarena(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuarena", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "200"},
    )


def test_import_run_and_export_from_the_command_line(tmp_path):
    problem, honest, wrong = tmp_path / "rmsnorm", tmp_path / "honest", tmp_path / "wrong"
    done = gpuarena(
        "import", "flashinfer", RMSNORM / "definition.json", "--workloads", RMSNORM / "workloads.jsonl", "-o", problem
    )
    assert done.returncode == 0, done.stderr
    assert f"next: gpuarena run {problem}" in done.stderr  # checked on the way (test_flashinfer_import.py)
    for name, folder in (("python_returning", honest), ("python_wrong", wrong)):
        done = gpuarena(
            "import", "flashinfer-solution", RMSNORM / "solutions" / f"{name}.json", "--problem", problem, "-o", folder
        )
        assert done.returncode == 0, done.stderr

    passed = gpuarena("run", problem, honest, "--device", "cpu", "--mode", "test", "--json")
    assert passed.returncode == 0, passed.stdout[-3000:] + passed.stderr[-3000:]
    assert json.loads(passed.stdout)["status"] == "PASSED"
    failed = gpuarena("run", problem, wrong, "--device", "cpu", "--mode", "test", "--json")
    assert failed.returncode == 1 and json.loads(failed.stdout)["status"] == "WRONG_VALUES"
    (tmp_path / "passed.json").write_text(passed.stdout)
    (tmp_path / "failed.json").write_text(failed.stdout)

    traces = tmp_path / "traces.jsonl"
    done = gpuarena("export", "traces", tmp_path / "passed.json", "-o", traces)
    assert done.returncode == 2 and "--problem" in done.stderr  # the record names the folder "rmsnorm" only
    done = gpuarena(
        "export",
        "traces",
        tmp_path / "passed.json",
        tmp_path / "failed.json",
        "-o",
        traces,
        "--problem",
        problem,
        "--solution-name",
        "rmsnorm_torch_steps",
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 4 trace(s)" in done.stderr  # three passed workloads; the wrong run stopped at its first
    read = fit.read_traces(traces)
    assert [t.evaluation.status for t in read] == ["PASSED"] * 3 + ["INCORRECT_NUMERICAL"]
    assert {t.definition for t in read} == {"rmsnorm_h256"}

    dataset = tmp_path / "dataset"
    done = gpuarena("export", "flashinfer", problem, "-o", dataset)
    assert done.returncode == 0, done.stderr
    assert fit.read_definition(dataset / "definitions" / "rmsnorm" / "rmsnorm_h256.json") == fit.read_definition(
        RMSNORM / "definition.json"
    )
    assert fit.read_workloads(dataset / "workloads" / "rmsnorm" / "rmsnorm_h256.jsonl") == fit.read_workloads(
        RMSNORM / "workloads.jsonl"
    )

    done = gpuarena("export", "solution", honest, "--problem", problem)
    assert done.returncode == 0, done.stderr
    assert fit.parse_solution(json.loads(done.stdout)) == fit.read_solution(
        RMSNORM / "solutions" / "python_returning.json"
    )


def test_readme_walkthrough_links_traces_to_the_exported_solution(tmp_path):
    """docs/peers.md's "Coming from FlashInfer-Bench", command by command (on the CPU): the traces find
    the record's problem without --problem, and name the solution as `export solution` does."""
    problem = "problems/flashinfer/rmsnorm"
    done = gpuarena(
        "import", "flashinfer", RMSNORM / "definition.json", "-w", RMSNORM / "workloads.jsonl", "-o", problem,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    solution = RMSNORM / "solutions" / "python_returning.json"
    done = gpuarena(
        "import", "flashinfer-solution", solution, "--problem", problem, "-o", "my_solution",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = gpuarena("run", problem, "my_solution", "--device", "cpu", "--budget", "0.3", "--json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    (tmp_path / "record.json").write_text(run.stdout)
    done = gpuarena("export", "traces", "record.json", "-o", "traces.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    traces = fit.read_traces(tmp_path / "traces.jsonl")
    assert traces and {t.evaluation.status for t in traces} == {"PASSED"}
    exported = gpuarena("export", "solution", "my_solution", "-o", "my_solution.json", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    name = fit.read_solution(tmp_path / "my_solution.json").name
    assert name == fit.read_solution(solution).name  # the name it was imported with
    assert {t.solution for t in traces} == {name}
    assert flashinfer_reader.IMPORTED_SIDECAR == flashinfer_sidecar.SIDECAR  # how the reader knows an imported one
    assert {t.definition for t in traces} == {fit.read_solution(tmp_path / "my_solution.json").definition}


def test_import_errors_are_one_clear_line(tmp_path):
    done = gpuarena(
        "import",
        "flashinfer",
        RMSNORM / "definition.json",
        "--workloads",
        INVALID / "workloads_safetensors.jsonl",
        "-o",
        tmp_path / "p",
    )
    message = " ".join(done.stderr.split())  # the console wraps long lines
    assert done.returncode == 2
    assert "the safetensors file blob/rmsnorm/b1.safetensors is not found" in message
    assert "Traceback" not in message
    done = gpuarena(
        "import",
        "flashinfer",
        INVALID / "definition_bad_dtype.json",
        "--workloads",
        RMSNORM / "workloads.jsonl",
        "-o",
        tmp_path / "p",
    )
    assert done.returncode == 2 and "field 'inputs.weight.dtype'" in " ".join(done.stderr.split())
