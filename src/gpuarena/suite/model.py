"""A suite result: one framework on one device, problem by problem, as JSON."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

FORMAT = "gpuarena.suite/1"


class ProblemTime(BaseModel):
    """One problem's time: the weighted geometric mean of its workloads' median times."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    problem: str
    """The problem's id."""
    level: int
    """Its level."""
    weight: float
    """Its weight in the suite (problem.toml)."""
    level_weight: float | None = None
    """Its weight among its level's problems (problem.toml; None: not given, the per-level score
    uses `weight`)."""
    model_weights: dict[str, float] = {}
    """Its share of each model-phase's time, by label (problem.toml; the per-model scores)."""
    tags: list[str] = []
    """Its tags."""
    status: str
    """The harness's verdict on the framework's implementation (PASSED, or why not)."""
    reason: str = ""
    """Why it did not pass, when it did not."""
    time_us: float | None = None
    """Weighted geometric mean over the workloads of each median, in microseconds."""
    low_us: float | None = None
    """The same mean of each workload's 95% interval's low end."""
    high_us: float | None = None
    """And of its high end."""
    workloads: dict[str, float] = {}
    """workload -> median microseconds (over several runs: the geometric mean of the runs' medians)."""
    runs_us: list[float] = []
    """Each run's time_us, in run order (`suite run --runs N`; suite/runs.py). Over several runs
    time_us is their geometric mean and low_us / high_us the lowest and highest end of the runs'
    intervals, so the interval spans every run. Empty in a file written before runs were kept:
    one run, time_us."""


class SuiteResult(BaseModel):
    """What `gpuarena suite run` writes."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    format: str = FORMAT
    """The format's name and version."""
    framework: str
    """pytorch, torch-compile or jax."""
    device: str
    """The harness device (cpu, cuda)."""
    device_name: str
    """The device's name as the run's record gives it."""
    environment: dict[str, str]
    """Versions: python, torch, triton, gpuarena."""
    command: str
    """The command that made it."""
    problems: list[ProblemTime]
    """Every problem run, in order."""
    runs: int = 1
    """How many times the whole suite was run (each problem's runs_us)."""
    left_out: dict[str, str] = {}
    """Problems chosen but not run, and why (no workload on the device, another framework's, or
    left out of a shipped baseline after its run): a comparison names them, never drops them silently."""
