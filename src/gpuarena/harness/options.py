"""What a run is asked to do (device, mode, limits, seed), apart from the supervisor that does
it: the CLI, the runner, the suite and the red team build these, and the supervisor reads them."""

from __future__ import annotations

from dataclasses import dataclass

from gpuarena.contracts.records import Mode

PUBLIC_SEED = 20261122
"""Seed of test and benchmark runs, so they are reproducible; ranked runs draw a secret one."""


@dataclass
class RunOptions:
    device: str = "cpu"
    mode: Mode = "benchmark"
    timeout_s: float = 600.0
    """The solution's time limit: from the worker's start-up done to the run's end. Start-up
    (our interpreter, torch, the device's context) is ours, not the solution's, and has its
    own limit (supervisor.START_UP_LIMIT_S): a busy machine never times out an honest run."""
    trials: int = 3
    """Correctness trials per workload, each on fresh inputs: at most this many; a workload timed
    next gets one, and a run's correctness-only workloads share this many x 4 (correctness.trials_for)."""
    budget_s: float = 2.0
    """Timing budget per workload; timing stops earlier once the interval is tight."""
    min_samples: int | None = None
    max_samples: int = 2000
    workloads: list[str] | None = None
    """Only these workloads (default: all that run on the device kind)."""
    seed: int | None = None
    """Ranked runs: the secret seed held by the supervisor (a local run draws one)."""
    timing_method: str | None = None
    memory_limit_bytes: int | None = None
    """Cap on the worker's private writable memory (default: half the machine, at least 4 GiB;
    GPUARENA_WORKER_MEMORY_LIMIT=0 turns the cap off)."""
    peaks: dict[str, float] | None = None
    """Device peaks to use instead of measuring them (known hardware, tests); enables the
    floor check on any device. Keys: bandwidth_gbs, tflops_bf16, tflops_fp32."""
    worker_isolation: bool | None = None
    """Run the worker without the supervisor's rights (a user of its own when the supervisor
    is root; the supervisor non-dumpable). Default: GPUARENA_WORKER_ISOLATION (1 or 0) if
    set, else on (CUDA buffers then travel as cuMemCreate file descriptors)."""
    device_audit: bool = True
    """Audit the solution's claimed device time with the GPU's own counters (CUDA,
    device_audit.py), unless GPUARENA_DEVICE_AUDIT=0 turns it off on the machine. False is
    for code the caller trusts (the suite times the dataset's own references and their
    torch.compile: about 0.5 s of audit a workload on an H100); ranked runs ignore it."""
    kernel_duration: bool | None = None
    """Read ncu's Duration for both sides after the timed rounds (CUDA; a profiler opening
    per side, about 4 s each on an H100; the reference's figure is cached per machine).
    Default: GPUARENA_KERNEL_DURATION (1 or 0) if set, else on in ranked mode only: the
    figure ranks nothing, and the check it makes backs up the device audit on the verdicts
    that rank (issue 18: a benchmark run of one workload took 14.6 s with it, 9 without)."""
