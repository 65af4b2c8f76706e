"""The device's own peaks, measured once and cached: a large copy and large matrix products.

They set speed-of-light fractions and the physical floor under which a time is impossible.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from gpuarena.cache import cache_dir

FLOOR_MARGIN = 0.8
"""A time below 80% of the floor is rejected: peaks are measured, not exact."""


def _time_ms(fn, repeats: int = 10) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def _bandwidth_gbs(device: torch.device) -> float:
    """The better of a copy (bytes read + written) and a read sweep, over 1 GiB of float32:
    kernels that mostly read can beat a copy's rate, and the floor must never reject a real
    kernel. Its buffers are freed on return, before the matmuls."""
    n = 1 << 28
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda: dst.copy_(src))
    sink = torch.empty((), device=device)
    read_ms = _time_ms(lambda: torch.sum(src, dim=0, out=sink))
    return max(2 * n * 4 / (copy_ms * 1e-3), n * 4 / (read_ms * 1e-3)) / 1e9


def measure(device: torch.device) -> dict[str, float]:
    """Copy bandwidth (bytes read + written) and matmul rates on random data."""
    bandwidth = _bandwidth_gbs(device)
    peaks = {"bandwidth_gbs": round(bandwidth, 1)}
    for dtype, key in ((torch.bfloat16, "tflops_bf16"), (torch.float32, "tflops_fp32")):
        size = 8192 if dtype != torch.float32 else 4096
        a = torch.randn(size, size, device=device, dtype=dtype)
        b = torch.randn(size, size, device=device, dtype=dtype)
        ms = _time_ms(lambda: a @ b)
        peaks[key] = round(2 * size**3 / (ms * 1e-3) / 1e12, 1)
    torch.cuda.empty_cache()
    return peaks


def device_peaks(device: torch.device, uuid: str | None, name: str) -> dict[str, float]:
    """Peaks for this device, from the cache or measured now."""
    key = (uuid or name).replace("/", "_").replace(" ", "_")
    path = Path(cache_dir()) / "peaks" / f"{key}.json"
    if path.is_file():
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            pass
    peaks = measure(device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(peaks))
    return peaks


def peak_flops(peaks: dict[str, float], dtype: torch.dtype) -> float:
    """The matrix rate that applies to a dtype, in FLOP/s."""
    key = "tflops_fp32" if dtype in (torch.float32, torch.float64) else "tflops_bf16"
    return peaks[key] * 1e12


def floor_seconds(peaks: dict[str, float], moved: float | None, flops: float | None) -> float | None:
    """The physical floor: no correct kernel moves bytes faster than the copy peak or computes
    faster than the fastest matrix rate of the device."""
    terms = []
    if moved:
        terms.append(moved / (peaks["bandwidth_gbs"] * 1e9))
    if flops:
        terms.append(flops / (max(peaks["tflops_bf16"], peaks["tflops_fp32"]) * 1e12))
    return max(terms) if terms else None


CPU_CORE_CEILING = {"bandwidth_gbs": 2000.0, "tflops_bf16": 4.0, "tflops_fp32": 4.0}
"""What no CPU core of today does: move more than 2 TB/s (an L1 cache's loads and stores at
5.5 GHz come to about 1 TB/s) or compute more than 4 TFLOP/s (a core's matrix unit, AMX bf16,
about 2). Not measured, so fractions are not reported against it; it only sets a floor that a
claimed CPU time must clear, which a timer patched to tick a nanosecond a call cannot."""


def cpu_ceiling(cores: int) -> dict[str, float]:
    """The CPU_CORE_CEILING of `cores` cores together."""
    return {key: value * max(1, cores) for key, value in CPU_CORE_CEILING.items()}
