"""Two of the device audit's checks (rounds_audit.py gathers the figures): the calls run without
the cache sweeps against the claim, and the memory the harness's sweeps read in the solution's
requests against what they read alone; and when the unswept requests bound a small claim as
well as the swept ones (`streams_past_l2`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from gpuarena.contracts.records import DeviceAudit, Status
from gpuarena.harness.device import device_audit
from gpuarena.harness.device.device_audit import DeviceSampler
from gpuarena.harness.failure import RunFailure
from gpuarena.harness.session import WorkloadSession

MISSING_READS_FRACTION = 0.10
MISSING_READS_SIGMAS = 5.0
"""Requests whose median shows the GPU reading less from device memory than the harness alone by
more than this share of the harness's reads (plus this many times the figure's error) did not
evict the caches: a solution can replace the L2 sweep with work that keeps an SM as busy for as
long and reads nothing (warm_caches/sweeps_replaced_by_a_wait), which the busy time alone cannot
tell from the sweep. Honest requests read the sweep's 3 x L2 a call and their own inputs on top."""
UNSWEPT_FLOOR_US = 0.5
"""Allowed a call beyond 3 x the unswept figure's error, for the counters' scatter on what is
left: the harness's own copies in each request, taken off by its pair."""


@dataclass
class ReadSamples:
    """Per solution request: the GPU's busy time and bytes read beyond the harness's paired
    window, and the harness's own bytes read."""

    paired_ns: list[float]
    paired_bytes: list[float]
    harness_bytes: list[float]


def check_unswept(audit: DeviceAudit, unswept_ns: list[float], n: int) -> None:
    """The claim against what the counters saw of the calls without the sweeps (small kernels)."""
    if not unswept_ns:
        return
    audit.unswept_us_per_call = max(statistics.median(unswept_ns), 0.0) / n / 1e3
    audit.unswept_noise_us = device_audit.median_error(unswept_ns) / n / 1e3
    audit.unswept_per_request = [round(ns / n / 1e3, 3) for ns in unswept_ns]
    if audit.claimed_us is not None and device_audit.understated(
        audit.claimed_us, audit.unswept_us_per_call, noise_us=audit.unswept_noise_us, floor_us=UNSWEPT_FLOOR_US
    ):
        raise RunFailure(
            Status.REJECTED,
            f"the claimed device time ({audit.claimed_us:.2f} µs per call) is below what "
            f"the GPU's own counters saw of the same calls run one by one without the "
            f"cache sweeps ({audit.unswept_us_per_call:.2f} µs per call in the median of "
            f"{len(unswept_ns)} requests on fresh inputs, the harness's share taken "
            f"off, less {device_audit.NOISE_SIGMAS:g} x its error of "
            f"{audit.unswept_noise_us:.2f} µs and {UNSWEPT_FLOOR_US:g} µs): warm caches "
            "only make honest calls faster",
        )


def twins_decide(
    twin_ns: list[float], reference_ns: list[float], claimed_us: float | None, observed_us: float, noise_us: float
) -> bool:
    """Whether a verdict depends on the reference's twin blocks (busy ns each, `twin_ns`) beyond
    those sampled: none yet; the reference's timed blocks (`reference_ns`) busier than the least
    busy twin block (the shared-GPU check not passed beyond doubt); or a claim that what the
    counters saw of the solution's requests (`observed_us` a call, `noise_us` its error)
    contradicts unless some inflation is allowed (`device_audit.inflation` only loosens that check,
    never tightens it)."""
    if not twin_ns or (reference_ns and statistics.median(reference_ns) > min(twin_ns)):
        return True
    return claimed_us is not None and device_audit.understated(claimed_us, observed_us, 0.0, noise_us)


def check_reads(audit: DeviceAudit, sampler: DeviceSampler, samples: ReadSamples, n: int) -> None:
    """The harness's cache sweeps read in the solution's requests what they read alone."""
    audit.traffic = sampler.traffic
    if not audit.traffic or len(samples.paired_bytes) < len(samples.paired_ns) or not samples.paired_bytes:
        audit.traffic_skipped = sampler.traffic_missing or "no memory-traffic figures from the sampler"
        audit.traffic = ""
        return
    harness = statistics.median(samples.harness_bytes) / n / 1e6
    paired = statistics.median(samples.paired_bytes) / n / 1e6
    error = device_audit.median_error(samples.paired_bytes) / n / 1e6
    audit.harness_read_mb_per_call, audit.read_mb_per_call = round(harness, 3), round(paired, 3)
    if paired < -(MISSING_READS_FRACTION * harness + MISSING_READS_SIGMAS * error):
        raise RunFailure(
            Status.REJECTED,
            f"the GPU read {-paired:.1f} MB a call less from device memory in the "
            f"solution's timed requests than the harness alone reads around its calls "
            f"({harness:.1f} MB a call, nearly all the L2 sweep's): the cache sweeps "
            "before its calls did not evict the caches",
        )


STREAMING_L2_MULTIPLE = 2
"""A set this many times the L2 or larger streams from device memory even with warm caches
(`streams_past_l2`)."""


def streams_past_l2(session: WorkloadSession) -> bool:
    """Whether a request's calls stream their inputs and outputs from device memory even
    without the sweeps: its input sets and their destinations together take
    STREAMING_L2_MULTIPLE times the GPU's L2 or more. A request calls each set once, in order,
    right after every set was drawn afresh (measure.refresh_sets), so what L2 holds when a call
    starts is the last L2's worth of other sets' data, never its own: what the counters see of
    the unswept requests is then close to the calls' cold cost. Below that, a memory-bound
    kernel runs far faster warm than cold, so the unswept requests bound a forged claim only by
    the warm time, and the swept figure must be as precise as for any claim. (Counted over one
    set, GPU MODE's vectoradd at 1024 x 1024 and 2048 x 2048, 6 and 24 MiB a set in rotations
    of 252 and 384 MiB, took 11-21 requests for the swept figure alone, about 70 ms each, H200.)"""
    device = session.device
    if device.type != "cuda" or not session.sets:
        return False
    import torch

    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    tensors = [t for inputs in session.sets for t in inputs.values() if isinstance(t, torch.Tensor)]
    tensors += [t for dests in session.dests for t in dests]
    return bool(l2) and sum(t.numel() * t.element_size() for t in tensors) >= STREAMING_L2_MULTIPLE * l2
