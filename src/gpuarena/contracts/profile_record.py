"""The record of profile mode (harness/profile/): what Nsight Compute measured of each side's
profiled call. A contract of the Evaluation record (records.py), apart from the code that reads
ncu's output, so that the record does not import the profile floor."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class Stall(Strict):
    reason: str
    """ncu's stall reason (long_scoreboard, barrier, math_pipe_throttle, ...)."""
    cycles_per_issue: float
    """Warps stalled for this reason per instruction issued (ncu's WarpStateStats ratio)."""


class KernelProfile(Strict):
    """One kernel launch of the profiled call, as ncu measured it (kernels replayed alone,
    caches flushed, clocks at base: ncu's defaults, what a contestant's own ncu shows)."""

    name: str
    grid: str = ""
    block: str = ""
    duration_us: float | None = None
    compute_throughput_pct: float | None = None
    """The busiest SM unit's throughput as a share of its peak (ncu's Compute (SM) Throughput)."""
    memory_throughput_pct: float | None = None
    """The busiest memory unit's throughput as a share of its peak (ncu's Memory Throughput)."""
    achieved_occupancy_pct: float | None = None
    registers_per_thread: float | None = None
    shared_memory_per_block_bytes: float | None = None
    """Static plus dynamic shared memory a block asks for."""
    dram_bytes: float | None = None
    flops: float | None = None
    """FP16/FP32/FP64 FLOPs of the FMA pipes (tensor cores not counted)."""
    stalls: list[Stall] = Field(default_factory=list)
    """The top stall reasons, most cycles first."""

    @property
    def arithmetic_intensity(self) -> float | None:
        """FLOPs per DRAM byte: the roofline's x."""
        if not self.flops or not self.dram_bytes:
            return None
        return self.flops / self.dram_bytes

    @property
    def achieved_flops(self) -> float | None:
        """FLOP/s over the kernel's duration: the roofline's y."""
        if not self.flops or not self.duration_us:
            return None
        return self.flops / (self.duration_us * 1e-6)


class ProfileSide(Strict):
    """One side's profiled call: its kernels and where its report went."""

    kernels: list[KernelProfile] = Field(default_factory=list)
    report: str = ""
    """The .ncu-rep file, kept (open it in Nsight Compute's UI)."""

    @property
    def duration_us(self) -> float | None:
        """The kernels' durations summed (each replayed alone, as ncu does)."""
        found = [k.duration_us for k in self.kernels if k.duration_us is not None]
        return sum(found) if found else None


class ProfileRecord(Strict):
    """What `gpuarena run --mode profile` gives: the solution's and the reference's profiled
    call on one workload, and whether the profiled call computed the right outputs. A
    diagnostic for the author: nothing ranks on it, and the figures come from a process the
    solution runs in."""

    problem: str
    solution: str
    workload: str
    device: str
    status: str
    """PASSED (the profiled call's outputs match the reference's), WRONG_VALUES, or the
    failure that kept the profile from being taken (RUNTIME_ERROR, TIMEOUT)."""
    reason: str = ""
    solution_profile: ProfileSide = Field(default_factory=ProfileSide)
    reference_profile: ProfileSide = Field(default_factory=ProfileSide)
    peaks: dict[str, float] = Field(default_factory=dict)
    """The device's measured roofs (harness/device/peaks.py): bandwidth_gbs, tflops_fp32, tflops_bf16."""
    ncu_version: str = ""
    roofline: str = ""
    """The roofline plot's file (SVG), beside the reports."""
