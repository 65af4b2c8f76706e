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
    """workload -> median microseconds."""


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
