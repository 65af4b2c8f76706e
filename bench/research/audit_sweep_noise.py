"""How much of the GPU's counters does the harness's L2 sweep take, and how steadily? (issue 16:
audit requests must look exactly like timed ones, so the audit has to read the counters over
requests that sweep the caches, and take the sweeps off.)

Measured with the supervisor's own PM sampler (device_audit.py), in one process:
  idle        segments with nothing on the GPU
  sweep       blocks of CALLS read sweeps (nvidia.l2_read_sweep): busy µs per sweep, spread
  ce-copy     blocks of CALLS device-to-device copies of the sweep's size (copy engines: does
              the SMs' counter see them?), and whether such a copy evicts L2 like the sweep
  paired      blocks of sweep + softmax(64 x 1000) against sweep-only blocks, alternating:
              the per-call difference the audit would see, against the kernel's own time

    python3 bench/research/audit_sweep_noise.py --out audit-sweep.json     # on an NVIDIA GPU
"""

from __future__ import annotations

import argparse
import statistics

import torch
from probe_result import emit

from gpuarena.harness.device import device_audit
from gpuarena.harness.device.nvidia import l2_read_sweep

CALLS = 30
BLOCKS = 15


def per_call(values: list[float]) -> dict:
    return {
        "median_us": statistics.median(values) / 1e3,
        "min_us": min(values) / 1e3,
        "max_us": max(values) / 1e3,
        "cv": statistics.pstdev(values) / statistics.mean(values) if statistics.mean(values) else None,
    }


def event_us(work, n: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        torch.cuda.synchronize()
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="audit-sweep.json")
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    binary, why = device_audit.build_sampler()
    assert binary is not None, why
    sampler = device_audit.DeviceSampler(binary, 0)
    sweep = l2_read_sweep(device)
    l2 = torch.cuda.get_device_properties(device).L2_cache_size
    big_src = torch.ones(max(3 * l2, 128 << 20) // 4, device=device)
    big_dst = torch.empty_like(big_src)
    x = torch.randn(64, 1000, device=device)
    y = torch.empty_like(x)
    probe = torch.randn(8 << 20, device=device)  # 32 MiB, fits the H100's 50 MiB L2
    sink = torch.empty((), device=device)

    def softmax() -> None:
        torch.softmax(x, dim=1, out=y)

    def block(work) -> float:
        def run() -> None:
            for _ in range(CALLS):
                work()
            torch.cuda.synchronize()

        return sampler.segment(run)[1].busy_ns / CALLS

    result: dict = {"device": torch.cuda.get_device_name(0), "calls_per_block": CALLS, "blocks": BLOCKS}
    for w in (sweep, lambda: big_dst.copy_(big_src), softmax):
        w()
    torch.cuda.synchronize()
    with sampler.sampling():
        result["idle_busy_fraction"] = [round(w.busy_ns / w.span_ns, 4) for w in (sampler.idle() for _ in range(5))]
        result["sweep"] = per_call([block(sweep) for _ in range(BLOCKS)])
        result["ce_copy"] = per_call([block(lambda: big_dst.copy_(big_src)) for _ in range(BLOCKS)])
        result["softmax_alone"] = per_call([block(softmax) for _ in range(BLOCKS)])
        with_call, without = [], []
        for _ in range(BLOCKS):
            with_call.append(block(lambda: (sweep(), softmax())))
            without.append(block(sweep))
        diffs = [a - b for a, b in zip(with_call, without)]
        result["paired_sweep_softmax_minus_sweep"] = {
            "median_us": statistics.median(diffs) / 1e3,
            "min_us": min(diffs) / 1e3,
            "max_us": max(diffs) / 1e3,
        }
    result["event_us"] = {
        "sweep": event_us(sweep),
        "ce_copy": event_us(lambda: big_dst.copy_(big_src)),
        "softmax": event_us(softmax),
    }
    # does a copy-engine copy evict L2 like the read sweep? (time a 32 MiB read after each)
    read = lambda: torch.sum(probe, dim=0, out=sink)  # noqa: E731
    result["read_32MiB_after_us"] = {
        "warm": event_us(read),
        "sweep": _after(sweep, read),
        "ce_copy": _after(lambda: big_dst.copy_(big_src), read),
    }
    sampler.close()
    emit(result, args.out)


def _after(first, then, n: int = 20) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(n):
        first()
        start.record()
        then()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


if __name__ == "__main__":
    main()
