"""The worker never holds the seed or the reference outputs, and nothing it prints counts."""

from __future__ import annotations

import json

import torch

from conftest import SOLUTIONS, judge
from gpuarena.harness.supervisor import WorkloadSession, derive_seed
from gpuarena.problems import resolve_problem

SECRET_SEED = 731_902_118_455_023


def test_worker_sees_neither_seed_nor_reference_outputs(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    record = judge("level1/softmax", SOLUTIONS / "spy.py", mode="ranked", seed=SECRET_SEED,
                   workloads=["small-64x1000"], budget_s=0.2)
    assert record.status == "PASSED", record.reason
    calls = [json.loads(line) for line in (tmp_path / "gpuarena-spy-report.jsonl").read_text().splitlines()]
    assert len(calls) > 3  # three correctness trials, then warm-up and timed calls

    derived = {SECRET_SEED} | {derive_seed(SECRET_SEED, "small-64x1000", "trial", t) for t in range(3)}
    for seen in calls:
        assert not derived & set(seen["ints"])
        assert not any(str(s) in seen["strings"] for s in derived)

    # while trial t runs, its reference output (recomputed here) is nowhere in the worker's heap
    problem = resolve_problem("level1/softmax")
    workload = next(w for w in problem.spec.workloads if w.name == "small-64x1000")
    session = WorkloadSession(problem, workload, torch.device("cpu"), SECRET_SEED, arena=None)
    for trial in range(3):
        ref = session.reference(session.make("trial", trial))[0].double().pow(2).sum().item()
        assert not any(abs(s - ref) <= 1e-9 * abs(ref) for s in calls[trial]["tensor_fingerprints"])


def test_ranked_runs_draw_a_secret_seed_each_time():
    from gpuarena.harness.supervisor import RunOptions, Supervisor
    from gpuarena.solutions import load_solution

    problem = resolve_problem("level1/softmax")
    solution = load_solution(SOLUTIONS / "spy.py")
    seeds = {Supervisor(problem, solution, RunOptions(mode="ranked")).seed for _ in range(5)}
    assert len(seeds) == 5
    public = {Supervisor(problem, solution, RunOptions(mode="benchmark")).seed for _ in range(3)}
    assert len(public) == 1


def test_worker_environment_is_scrubbed(monkeypatch):
    from gpuarena.harness.process import scrubbed_env

    monkeypatch.setenv("GPUARENA_TOKEN", "secret-token")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    env = scrubbed_env()
    assert "GPUARENA_TOKEN" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert "PATH" in env
