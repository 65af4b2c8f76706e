"""What one block's profiler session costs, Kineto against the harness's own CUPTI collector
(issue 47). The worker's `cupti-device-time` block opened and closed torch's Kineto profiler once
per Time request, and the supervisor once per timed reference block. This times each step of a
session (enter, the calls, exit, reading and attributing the events) around 64 small calls with
Kineto, the same block through the collector (device/activity_timer.py), and the calls unprofiled;
then both methods' figures for the same kernels (a small add and a 4096^2 matmul), which must agree.

    python3 bench/research/kineto_session_cost.py --out kineto.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--calls", type=int, default=64)
    args = parser.parse_args()
    from torch.autograd.profiler import record_function

    from gpuarena.harness.device import activity_timer
    from gpuarena.harness.device.block import CALL_RANGE
    from gpuarena.harness.device.cupti_timing import device_busy_ns, kineto_profile
    from gpuarena.harness.device.timing import Timer

    native = activity_timer.load()
    print("collector:", "loaded" if native is not None else activity_timer.why())
    a = torch.randn(1 << 16, device="cuda")
    b = torch.randn(1 << 16, device="cuda")
    flush = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")

    def calls(mode: str) -> list[int]:
        marks: list[int] = []
        for _ in range(args.calls):
            flush.zero_()
            torch.cuda.synchronize()
            if mode == "kineto":
                with record_function(CALL_RANGE):
                    a + b
                    torch.cuda.synchronize()
            elif mode == "native":
                assert native is not None
                marks.append(native.now())
                a + b
                torch.cuda.synchronize()
                marks.append(native.now())
            else:
                a + b
                torch.cuda.synchronize()
        return marks

    steps: dict[str, list[float]] = {
        k: []
        for k in (
            "enter",
            "calls",
            "exit",
            "events",
            "attribute",
            "bare_calls",
            "native_begin",
            "native_calls",
            "native_end",
        )
    }
    for _ in range(args.sessions + 2):
        t0 = time.perf_counter()
        prof = kineto_profile()
        prof.__enter__()
        t1 = time.perf_counter()
        calls("kineto")
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        events = prof.kineto_results.events()
        t4 = time.perf_counter()
        device_busy_ns(events, args.calls)
        t5 = time.perf_counter()
        s = time.perf_counter()
        calls("bare")
        bare = time.perf_counter() - s
        row = [t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, bare]
        if native is not None:
            n0 = time.perf_counter()
            native.begin()
            n1 = time.perf_counter()
            marks = calls("native")
            n2 = time.perf_counter()
            native.end(marks, [])
            n3 = time.perf_counter()
            row += [n1 - n0, n2 - n1, n3 - n2]
        for key, value in zip(steps, row):
            steps[key].append(value * 1e3)
    result = {
        k: {"median_ms": round(statistics.median(v[2:]), 3), "first_ms": round(v[0], 3)} for k, v in steps.items() if v
    }
    print(json.dumps(result, indent=1))

    agreement = {}
    x = torch.randn(4096, 4096, device="cuda")
    for name, op in {"add-64k": lambda i: a + b, "matmul-4096": lambda i: x @ x}.items():
        figures = {}
        for label in ("kineto", "native"):
            if label == "native" and native is None:
                continue
            saved = activity_timer._loaded.get("timer")
            activity_timer._loaded["timer"] = native if label == "native" else None
            try:
                timer = Timer(torch.device("cuda"))
                block = timer.run_block(op, args.calls)
            finally:
                activity_timer._loaded["timer"] = saved
            figures[label] = {"median_ns": statistics.median(block.device_ns), "method": block.method}
        agreement[name] = figures
        print(name, json.dumps(figures))
    if args.out:
        with open(args.out, "w") as f:
            payload = {"calls": args.calls, "sessions": args.sessions, "device": torch.cuda.get_device_name()}
            json.dump({**payload, "steps_ms": result, "agreement": agreement}, f, indent=1)


if __name__ == "__main__":
    main()
