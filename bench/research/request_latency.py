"""What one request to a worker costs when it does nothing: the socket, the freezer, the checks.

round_costs.py put a worker's round trip at about 30 ms on an H200 where the worker's own work
for a timed request was about 8 ms (sampled_stacks.py). This starts one real worker (sandboxed,
every guard on, as a run starts it) and times `Ready` requests, which do nothing in the worker:
as the harness sends them (thawed before, frozen after), and with the freezer bypassed, so the
difference is the freezer's. Each figure is the median and the 90th percentile of N requests.

    python3 bench/research/request_latency.py --n 200 --out request-latency.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def timed(n: int, once) -> dict[str, float]:  # type: ignore[no-untyped-def]
    walls = []
    for _ in range(n):
        started = time.perf_counter_ns()
        once()
        walls.append((time.perf_counter_ns() - started) / 1e6)
    walls.sort()
    return {"median_ms": round(statistics.median(walls), 3), "p90_ms": round(walls[int(0.9 * (n - 1))], 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--gpu", action="store_true", help="the worker sees the GPUs (and makes a context)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    from gpuarena.contracts import messages
    from gpuarena.harness.launch.started import StartedWorker

    started = StartedWorker(gpu=args.gpu, prepare_on="cuda:0" if args.gpu else None)
    started.wait_prepared()
    worker = started.process
    deadline = time.monotonic() + 600
    result: dict[str, object] = {
        "command": "bench/research/request_latency.py",
        "freezer": worker.freezer.method,
        "prepared_on": started.prepared_on,
    }
    try:
        worker.ask(messages.Ready(), deadline, "starting")
        result["as the harness sends them"] = timed(args.n, lambda: worker.ask(messages.Ready(), deadline, "probing"))
        freezer = worker.freezer
        result["freeze alone"] = timed(args.n, lambda: (freezer.thaw(), freezer.freeze()))
        freezer.thaw()
        real_freeze = freezer.freeze
        freezer.freeze = lambda: None  # type: ignore[method-assign]
        try:
            result["without the freezer"] = timed(args.n, lambda: worker.ask(messages.Ready(), deadline, "probing"))
        finally:
            freezer.freeze = real_freeze  # type: ignore[method-assign]
    finally:
        started.close()
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
