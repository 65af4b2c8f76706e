"""Scalar inputs whose value differs between a definition's workloads (FlashInfer-Bench passes
each workload its own value): each gets the gpuarena-only workload axis, and its reference and
solutions get exactly its own value; a scalar the same in every workload is kept as one value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gpuarena.harness.problem_check import check_problem
from gpuarena.interop import flashinfer_trace as fit
from gpuarena.interop.flashinfer_export import export_definition
from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.interop.flashinfer_problem import CPU_SMOKE, problem_files
from gpuarena.interop.flashinfer_sidecar import SIDECAR, ProblemSidecar
from gpuarena.problems import load_problem

from .conftest import FIXTURES

SCALAR_EPS = FIXTURES / "scalar_eps"
DEFINITION = SCALAR_EPS / "definition.json"
WORKLOADS = SCALAR_EPS / "workloads.jsonl"
CPU = torch.device("cpu")

HONEST = """import torch


def solve(hidden_states, weight, eps, out_scale):
    inv_rms = torch.rsqrt((hidden_states * hidden_states).mean(dim=-1, keepdim=True) + eps)
    return hidden_states * inv_rms * weight * out_scale
"""


def _draw(problem, name: str, seed: int = 5) -> dict:
    workload = next(w for w in problem.spec.workloads if w.name == name)
    return problem.make_inputs(dict(workload.axes), workload.torch_dtype, CPU, torch.Generator().manual_seed(seed))


def _judged(problem_folder: Path, path: Path, code: str):
    """`code` written to `path` and judged on the CPU in test mode."""
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.solutions import load_solution

    path.write_text(code)
    return evaluate(load_problem(problem_folder), load_solution(path), RunOptions(device="cpu", mode="test"))


def test_each_workload_gets_its_own_scalar_value(tmp_path):
    import_definition(DEFINITION, WORKLOADS, tmp_path / "p")  # refused before: gpuarena check passes on the CPU
    assert check_problem(tmp_path / "p").ok
    problem = load_problem(tmp_path / "p")
    axes = {w.name: dict(w.axes) for w in problem.spec.workloads}
    assert axes == {
        "small-eps-b4": {"batch_size": 4, "hidden_size": 64, "flashinfer_workload": 0},
        "large-eps-b4": {"batch_size": 4, "hidden_size": 64, "flashinfer_workload": 1},
        "small-eps-b9": {"batch_size": 9, "hidden_size": 64, "flashinfer_workload": 2},
    }
    for name, eps in (("small-eps-b4", 1e-6), ("large-eps-b4", 10.0), ("small-eps-b9", 1e-6)):
        for seed in (1, 2):
            inputs = _draw(problem, name, seed)
            assert inputs["eps"] == eps and inputs["out_scale"] == 2.0
    small, large = _draw(problem, "small-eps-b4"), _draw(problem, "large-eps-b4")
    assert torch.equal(small["hidden_states"], large["hidden_states"])  # same axes and seed: only eps differs
    assert not torch.allclose(problem.reference(**small), problem.reference(**large), rtol=0.5)
    sidecar = ProblemSidecar.model_validate_json((tmp_path / "p" / SIDECAR).read_text())
    assert sidecar.scalars == {"eps": 1e-6, "out_scale": 2.0}
    assert [w["eps"].value for w in sidecar.workload_inputs] == [1e-6, 10.0, 1e-6]  # type: ignore[union-attr]
    readme = (tmp_path / "p" / "README.md").read_text()
    assert "| eps | input | scalar = per workload |" in readme and "| out_scale | input | scalar = 2.0 |" in readme


def test_a_scalar_the_same_in_every_workload_adds_no_workload_axis(tmp_path):
    lines = [json.loads(line) for line in WORKLOADS.read_text().splitlines()]
    for line in lines:
        line["workload"]["inputs"]["eps"]["value"] = 1e-5
    lines[1]["workload"]["uuid"] = "other-b4"
    files, _ = problem_files(
        fit.parse_definition(json.loads(DEFINITION.read_text())), [fit.Trace.model_validate(x) for x in lines]
    )
    sidecar = ProblemSidecar.model_validate_json(files[SIDECAR])
    assert sidecar.workload_axis is None and sidecar.workload_inputs == []
    assert sidecar.scalars == {"eps": 1e-5, "out_scale": 2.0}
    assert "flashinfer_workload" not in files["problem.toml"]


def test_a_value_of_another_type_is_a_value_of_its_own():
    """1 and 1.0 are equal in Python but not one value for a solution (int vs float)."""
    lines = [json.loads(line) for line in WORKLOADS.read_text().splitlines()]
    lines[0]["workload"]["inputs"]["out_scale"]["value"] = 2
    for line in lines[1:]:
        line["workload"]["inputs"]["eps"]["value"] = 1e-6
    files, _ = problem_files(
        fit.parse_definition(json.loads(DEFINITION.read_text())), [fit.Trace.model_validate(x) for x in lines]
    )
    sidecar = ProblemSidecar.model_validate_json(files[SIDECAR])
    given = [w["out_scale"].value for w in sidecar.workload_inputs]  # type: ignore[union-attr]
    assert sidecar.workload_axis == "flashinfer_workload" and given == [2, 2.0, 2.0]
    assert type(given[0]) is int and type(given[1]) is float


def test_the_cpu_smoke_workload_takes_the_scalars_of_the_workload_it_is_made_from():
    lines = [json.loads(line) for line in WORKLOADS.read_text().splitlines()]
    for line, batch in zip(lines, (400_000, 300_000, 500_000)):  # none fits the CPU
        line["workload"]["axes"]["batch_size"] = batch
    files, notes = problem_files(
        fit.parse_definition(json.loads(DEFINITION.read_text())), [fit.Trace.model_validate(x) for x in lines]
    )
    sidecar = ProblemSidecar.model_validate_json(files[SIDECAR])
    assert sidecar.cpu_smoke == CPU_SMOKE and any(CPU_SMOKE in note for note in notes)
    assert sidecar.scalars["eps"] == 10.0  # large-eps-b4, the smallest, is halved into it


@pytest.mark.harness
def test_an_honest_solution_passes_and_a_fixed_eps_fails_the_other_workload(tmp_path):
    import_definition(DEFINITION, WORKLOADS, tmp_path / "p", convention="return")
    record = _judged(tmp_path / "p", tmp_path / "honest.py", HONEST)
    assert record.status == "PASSED", record.reason
    assert [(w.name, w.status) for w in record.workloads] == [
        ("small-eps-b4", "PASSED"),
        ("large-eps-b4", "PASSED"),
        ("small-eps-b9", "PASSED"),
    ]
    fixed = HONEST.replace("keepdim=True) + eps)", "keepdim=True) + 1e-6)")
    assert fixed != HONEST
    record = _judged(tmp_path / "p", tmp_path / "fixed.py", fixed)
    assert record.status == "WRONG_VALUES"
    statuses = {w.name: w.status for w in record.workloads}
    assert statuses["small-eps-b4"] == "PASSED" and statuses["large-eps-b4"] == "WRONG_VALUES"


def test_scalars_that_differ_round_trip(tmp_path):
    import_definition(DEFINITION, WORKLOADS, tmp_path / "p")
    definition, workloads = export_definition(load_problem(tmp_path / "p"))
    assert definition == fit.read_definition(DEFINITION)
    assert workloads == fit.read_workloads(WORKLOADS)
    assert [w.workload.inputs["eps"].value for w in workloads] == [1e-6, 10.0, 1e-6]  # type: ignore[union-attr]


def test_flashinfer_bench_reads_the_fixture_and_the_export(fib, tmp_path):
    assert fib.load_json_file(fib.Definition, DEFINITION).name == "rmsnorm_scaled_h64"
    assert len(fib.load_jsonl_file(fib.Trace, WORKLOADS)) == 3
    import_definition(DEFINITION, WORKLOADS, tmp_path / "p")
    _, workloads = export_definition(load_problem(tmp_path / "p"))
    fit.write_jsonl(workloads, tmp_path / "w.jsonl")
    loaded = fib.load_jsonl_file(fib.Trace, tmp_path / "w.jsonl")
    assert [t.workload.inputs["eps"].value for t in loaded] == [1e-6, 10.0, 1e-6]
