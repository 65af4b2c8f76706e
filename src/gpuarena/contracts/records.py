"""The Evaluation record: what the harness decides, as JSON the server, runners and scoring rely on."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from gpuarena import HARNESS_VERSION
from gpuarena.contracts.profile_record import ProfileRecord
from gpuarena.contracts.status import Status

Mode = Literal["test", "benchmark", "ranked", "profile"]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Timing(Record):
    """Statistics of one timed function on one workload, computed by the supervisor from raw samples."""

    median_us: float
    ci95_low_us: float
    """Lower end of the bootstrap 95% interval of the median."""
    ci95_high_us: float
    samples: int
    method: str
    """How each sample was taken: cupti-device-time, cuda-sync-wallclock, cpu-perf-counter."""
    e2e_median_us: float | None = None
    """Host clock around each call with a device-wide sync: includes launch and host work."""
    mean_us: float | None = None
    min_us: float | None = None
    kernel_duration_us: float | None = None
    """ncu's "Duration" (gpu__time_duration.sum) summed over the call's kernels, each launched
    alone, median over kernel_duration_calls calls after the same eviction: the figure ncu
    gives for the same kernels (kernels only; copies and memsets are not in it). It includes
    each kernel's launch and drain, which kernels following one another in a stream overlap,
    so it is above median_us for small kernels (CUDA, where CUPTI's Range Profiler can run)."""
    kernel_duration_calls: int = 0
    kernel_duration_cached: bool = False
    """kernel_duration_us was read from this machine's cache of an earlier run (the reference's
    figure only: same problem version, workload, device, driver and software), not measured in
    this run: opening the profiler costs about 4 s on an H100."""


class SpeedOfLight(Record):
    """Achieved rates against the device's measured peaks (not datasheets)."""

    bytes: float | None = None
    flops: float | None = None
    bandwidth_gbs: float | None = None
    bandwidth_fraction: float | None = None
    tflops: float | None = None
    compute_fraction: float | None = None
    floor_us: float | None = None
    """Physical floor: max(bytes / peak bandwidth, flops / peak rate); a faster time is impossible."""


class DeviceAudit(Record):
    """The solution's claimed device time against the GPU's own counters, read from outside
    the worker over its timed requests themselves (CUDA; harness/rounds_audit.py)."""

    method: str = "cupti-pm-sampling sm__cycles_active.max"
    calls: int = 0
    """Timed calls in the sampled requests (all of the timed rounds')."""
    observed_us_per_call: float | None = None
    """The busiest SM's active time over the solution's timed requests, per call, less the harness's."""
    harness_us_per_call: float | None = None
    """The same for the harness alone (a no-op solve() through the same code, cache sweeps
    included, in the supervisor)."""
    claimed_us: float | None = None
    """The solution's median device time, as the worker reported it."""
    reference_observed_us_per_call: float | None = None
    """The trusted reference sampled the same way, per call, less the harness's share."""
    reference_claimed_us: float | None = None
    """The reference's median device time from the timed rounds."""
    inflation_us: float = 0.0
    """What the counters see of a call beyond its timed device time: the reference's observed
    less its claimed time, at least 0; taken off the solution's observed time before the check."""
    reference_timed_us_per_call: float | None = None
    """Busy time per call of the reference's timed blocks (median block),"""
    reference_twin_us_per_call: float | None = None
    """and of its twin's, which does more harness work: far more in the timed blocks means
    something else used the GPU while the reference was timed."""
    observed_us_per_request: list[float] = Field(default_factory=list)
    """Each sampled request's figure: its busy time less the harness block's sampled just
    before it, per call (observed_us_per_call is their median)."""
    noise_us: float = 0.0
    """The standard error of the observed figure (of the median of the per-request figures,
    from their spread)."""
    harness_pace_us: float = 0.0
    """How long each call of the harness's block waited on the host, last: the solution's host
    time per call beyond the harness's, so that the harness's GPU work is spaced out as in the
    solution's requests (rounds_audit.RoundsAudit._pace)."""
    margin: float | None = None
    """Claims under margin x (observed - inflation - 3 x noise) are rejected."""
    unswept_us_per_call: float | None = None
    """Small kernels only (claims under rounds_audit.UNSWEPT_UNDER_US): the busiest SM's active
    time per call over requests of the solution's calls run one by one without the cache
    sweeps, on fresh inputs, less the harness alone run the same way (median of the requests).
    Warm caches only make calls faster, so this bounds an honest cold claim from below without
    the sweeps' noise; claims under margin x (it - 3 x unswept_noise_us - the floor) are rejected."""
    unswept_noise_us: float = 0.0
    """The standard error of unswept_us_per_call."""
    unswept_per_request: list[float] = Field(default_factory=list)
    """Each unswept request's figure, per call."""
    traffic: str = ""
    """The memory-traffic counter read beside the activity one ('' for none: `traffic_skipped`)."""
    harness_read_mb_per_call: float | None = None
    """Device-memory reads of the harness alone per call (its L2 sweep reads 3 x L2 before each call),"""
    read_mb_per_call: float | None = None
    """and of the solution's timed requests, less the harness block's sampled just before each
    (median): well under 0 means the sweeps did not read what they read in the harness alone."""
    traffic_skipped: str = ""
    """Why the reads were not checked (the chip gives no traffic counter beside the activity one)."""
    skipped: str = ""
    """Why no audit ran (no sampler on this machine)."""
    windows: str = ""
    """How its segments were read: "instants, offset X µs" (the samples' clock measured against
    the host's, device/sample_clock.py; ", samples missing from up to N% of a window" where some
    were lost and the window was read scaled to its whole) or "marks: why" (a decoding pass at each end)."""
    seconds: float | None = None
    """Wall time this workload's audit added: its sampler's marks or guards and reads, the twins'
    blocks, the rounds run only because its figure was not yet steady, and the unswept requests."""


class WorkloadResult(Record):
    name: str
    status: Status
    reason: str = ""
    axes: dict[str, int] = Field(default_factory=dict)
    dtype: str = ""
    weight: float = 1.0
    trials: int = 0
    """Correctness trials run, each on fresh inputs."""
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    """max |out - ref| / max(|ref|, atol) over all elements and outputs."""
    l2_rel_error: float | None = None
    error_vs_float64: float | None = None
    """The solution's relative L2 error against the reference computed in float64 on the same
    inputs (worst over trials and floating outputs)."""
    reference_error_vs_float64: float | None = None
    """The reference's own error against that float64 computation: what this dtype's math
    gives; a problem asking for faithful math allows a small multiple of it."""
    float64_skipped: str = ""
    """Why the float64 comparison is missing (a reference that cannot run in float64 here)."""
    time: Timing | None = None
    reference_time: Timing | None = None
    speedup: float | None = None
    """Reference median over solution median."""
    speedup_ci95: tuple[float, float] | None = None
    """95% interval of the ratio of medians, from resampling whole rounds (paired)."""
    round_spread: float | None = None
    """How much the speed-up varied between rounds (median absolute deviation over the median)."""
    noisy: bool = False
    """The speed-up varied more than 5% between rounds: the machine was busy, compare on a quiet one."""
    speed_of_light: SpeedOfLight | None = None
    device_audit: DeviceAudit | None = None
    kernel_duration_skipped: str = ""
    """Why time.kernel_duration_us is missing (no CUPTI Range Profiler here, a profiler error,
    the phase switched off)."""


class Environment(Record):
    """Where the run happened; enough to compare and reproduce."""

    triton_interpret: bool = False
    """TRITON_INTERPRET was on: Triton kernels ran in the interpreter on the CPU (times mean nothing)."""

    device: str
    device_name: str
    device_uuid: str | None = None
    sm_count: int | None = None
    compute_capability: str | None = None
    memory_gb: float | None = None
    l2_cache_mb: float | None = None
    driver_version: str | None = None
    cuda_runtime: str | None = None
    clocks_before: dict[str, Any] | None = None
    clocks_after: dict[str, Any] | None = None
    torch_version: str
    triton_version: str | None = None
    solution_runtime: str | None = None
    """The package a jax or tvm-ffi solution ran on, with its version ("jax 0.11.2")."""
    python_version: str
    cpu_model: str
    hostname: str
    harness_version: str = HARNESS_VERSION
    peaks: dict[str, float] | None = None
    """Measured peak bandwidth (GB/s) and matrix rates (TFLOP/s) of this device."""
    timer_eviction: str | None = None
    """What made the caches cold before each timed call (CUDA): the L2 read sweep and, where
    the driver could load it, the instruction-cache sweep."""
    timer_records: str | None = None
    """Where each side's timer read the device's activity records (CUDA): gpuarena's CUPTI
    collector, or torch's Kineto profiler where the collector could not load (and why)."""
    worker_network: str | None = None
    """"isolated" when the worker ran in its own network namespace, "available" where the platform did not allow it."""
    worker_containment: str | None = None
    """The sandbox the worker ran in (bubblewrap's namespaces, the cgroup's limits), or why there was none."""


class Evaluation(Record):
    """One solution judged on one problem on one device."""

    status: Status
    reason: str = ""
    problem: str
    solution_hash: str
    solution_name: str = ""
    language: str = ""
    device: str
    mode: Mode
    workloads: list[WorkloadResult] = Field(default_factory=list)
    score: float | None = None
    """Weighted geometric mean of per-workload speedups (benchmark and ranked modes, when PASSED)."""
    environment: Environment | None = None
    log: str = ""
    """What the solution and its build printed (never parsed)."""
    harness_version: str = HARNESS_VERSION
    started_at: str = ""
    duration_s: float = 0.0
    profile: ProfileRecord | None = None
    """Profile mode: both sides' kernels under Nsight Compute on one workload
    (harness/profile/run.py); nothing in it ranks."""
    migration: dict[str, Any] | None = None
    """An app job (a port checked against a migration target): the migration report, as
    gpuarena.migration.report.MigrationReport writes it; score is then its points (0-150)."""
    phases: dict[str, float] = Field(default_factory=dict)
    """Wall seconds of duration_s per phase, in run order (harness/phases.py): start-up (the
    device's description and peaks, the audit's sampler, the worker's start and imports),
    build, correctness, timing, device audit (its own share of the timed rounds), ncu duration
    and teardown."""
