"""A job's kind (contracts.wire.JobKind) is told in one place (runner.execute.job_kind) and
travels to the job process in its request, which runs each kind by its own entry (RUNS)."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from gpuarena.contracts.wire import JobKind
from gpuarena.runner.execute import RUNS, ExecuteRequest, job_kind, run_app, run_kernel, run_sample
from gpuarena.runner_wire import ClaimedJob
from gpuarena.solutions.loader import solution_from_upload


def test_every_job_kind_has_its_entry() -> None:
    assert set(typing.get_args(JobKind)) == set(RUNS) == {"kernel", "app", "sample"}
    assert (RUNS["kernel"], RUNS["app"], RUNS["sample"]) == (run_kernel, run_app, run_sample)


def test_a_job_without_a_kind_or_with_an_unknown_one_is_refused() -> None:
    body = {
        "problem": {"id": "level1/x", "files": {}, "hash": "h"},
        "solution": solution_from_upload("s.py", b"def solve(x):\n    return x\n").model_dump(),
        "device": "cpu",
        "mode": "test",
        "cache": "/tmp/c",
        "out": "/tmp/o.json",
    }
    with pytest.raises(ValidationError, match="kind"):
        ExecuteRequest.model_validate(body)
    with pytest.raises(ValidationError, match="kind"):
        ExecuteRequest.model_validate({**body, "kind": "guess"})
    assert ExecuteRequest.model_validate({**body, "kind": "app"}).kind == "app"
    assert "kind" not in ClaimedJob.model_fields  # not on the wire yet: older runners forbid unknown fields


def test_the_kind_is_told_from_what_the_job_carries() -> None:
    from gpuarena.dataset.sample_pack import SAMPLE_LANGUAGE
    from gpuarena.problems.pack import PackedProblem

    kernel_solution = solution_from_upload("s.py", b"def solve(x):\n    return x\n")
    problem = PackedProblem(id="level1/x", files={"problem.toml": "", "reference.py": ""}, hash="h")
    golden = PackedProblem(id="migration/mlp", files={"golden.json": "{}"}, hash="g")
    sample = kernel_solution.model_copy(
        update={"manifest": kernel_solution.manifest.model_copy(update={"language": SAMPLE_LANGUAGE})}
    )
    assert job_kind(problem, kernel_solution) == "kernel"
    assert job_kind(golden, kernel_solution) == "app"
    assert job_kind(problem, sample) == "sample"
