"""What the device audit's memory-traffic counter sees (harness/device/pm_sampler.cpp, `read_bytes`):
the harness's L2 sweep, a wait of the same length (torch.cuda._sleep) that keeps one SM as busy
and reads nothing, and a small softmax, each sampled as a segment of 16 calls, several times.
The audit rejects requests that read far less than the harness alone (rounds_audit._check_reads);
this shows the gap it relies on.

Usage: python3 bench/research/audit_traffic_probe.py [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from gpuarena.harness.device import device_audit, nvidia

CALLS = 16
REPEATS = 8


def _median_ms(work) -> float:
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    device = torch.device("cuda", 0)
    sweep = nvidia.l2_read_sweep(device)
    probe = 1_000_000
    cycles = int(probe * _median_ms(sweep) / _median_ms(lambda: torch.cuda._sleep(probe)))
    x = torch.randn(128, 4096, device=device)
    works = {
        "L2 sweep": sweep,
        "wait as long": lambda: torch.cuda._sleep(cycles),
        "softmax 128x4096": lambda: torch.softmax(x, dim=-1),
        "nothing": lambda: None,
    }
    binary, why = device_audit.build_sampler()
    if binary is None:
        raise SystemExit(f"no sampler: {why}")
    sampler = device_audit.DeviceSampler(binary, 0)
    result = {
        "device": torch.cuda.get_device_name(),
        "traffic": sampler.traffic,
        "traffic_missing": sampler.traffic_missing,
        "l2_bytes": torch.cuda.get_device_properties(device).L2_cache_size,
        "calls": CALLS,
        "segments": {},
    }
    try:
        with sampler.sampling():
            for name, work in works.items():
                rows = []
                for _ in range(REPEATS):
                    torch.cuda.synchronize()

                    def block() -> None:
                        for _ in range(CALLS):
                            work()
                        torch.cuda.synchronize()

                    window = sampler.segment(block, name)[1]
                    rows.append(
                        {
                            "busy_us_per_call": round(window.busy_ns / CALLS / 1e3, 2),
                            "read_mb_per_call": None
                            if window.read_bytes is None
                            else round(window.read_bytes / CALLS / 1e6, 2),
                        }
                    )
                result["segments"][name] = rows
                reads = [r["read_mb_per_call"] for r in rows if r["read_mb_per_call"] is not None]
                print(
                    f"{name:18s} busy {statistics.median(r['busy_us_per_call'] for r in rows):9.2f} µs/call  "
                    f"read {statistics.median(reads) if reads else float('nan'):9.2f} MB/call",
                    flush=True,
                )
    finally:
        sampler.close()
    print(json.dumps({k: v for k, v in result.items() if k != "segments"}))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
