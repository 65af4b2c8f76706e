"""A job's kind (contracts.wire.JobKind) is told in one place, by the service from the problem
(service.runner_routes.job_kind); it travels on the claim as a typed job (runner_wire: KernelJob,
AppJob, SampleJob) and to the job process in its request, which runs each kind by its own entry
(RUNS). tests/service/test_runner_protocol.py runs the claims through the service and a runner."""

from __future__ import annotations

import typing

import pytest
from pydantic import ValidationError

from gpuarena.contracts.wire import JobKind
from gpuarena.runner.execute import RUNS, ExecuteRequest, run_app, run_kernel, run_sample
from gpuarena.runner_wire import JOBS, TYPED_JOB, AppJob, ClaimedJob, KernelJob, SampleJob
from gpuarena.solutions.loader import solution_from_upload


def test_every_job_kind_has_its_entry_and_its_class() -> None:
    assert set(typing.get_args(JobKind)) == set(RUNS) == set(JOBS) == {"kernel", "app", "sample"}
    assert (RUNS["kernel"], RUNS["app"], RUNS["sample"]) == (run_kernel, run_app, run_sample)
    assert (JOBS["kernel"], JOBS["app"], JOBS["sample"]) == (KernelJob, AppJob, SampleJob)
    assert all(cls.model_fields["kind"].default == kind for kind, cls in JOBS.items())


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


def test_a_claim_is_read_as_the_class_of_its_kind_and_needs_one() -> None:
    claim = {
        "job_id": 1,
        "lease_token": "t",
        "lease_s": 60.0,
        "submission_id": 2,
        "device_kind": "cpu",
        "mode": "test",
        "seed": None,
        "problem": {"id": "level1/x", "files": {}, "hash": "h"},
        "solution": solution_from_upload("s.py", b"def solve(x):\n    return x\n").model_dump(),
    }
    for kind, cls in JOBS.items():
        job = TYPED_JOB.validate_python({**claim, "kind": kind})
        assert type(job) is cls and job.kind == kind
        assert TYPED_JOB.validate_json(job.model_dump_json()) == job
    with pytest.raises(ValidationError, match="kind"):
        TYPED_JOB.validate_python(claim)  # a legacy claim: a new runner never gets one (docs/deploy.md)
    with pytest.raises(ValidationError, match="kind"):
        TYPED_JOB.validate_python({**claim, "kind": "guess"})
    assert "kind" not in ClaimedJob.model_fields  # legacy runners' model: they forbid unknown fields


def test_the_service_tells_the_kind_from_the_problem() -> None:
    from gpuarena.dataset.sample_pack import samples_problem
    from gpuarena.migration.target import APP_KIND
    from gpuarena.service.runner_routes import job_kind

    assert job_kind(samples_problem()[1]) == "sample"
    assert job_kind({"kind": APP_KIND, "outputs": []}) == "app"
    assert job_kind({"name": "axpy", "workloads": []}) == "kernel"
