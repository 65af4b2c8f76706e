"""Does a cache sweep run from another process's CUDA context leave a call as cold as the
worker's own sweep? (docs/harness.md: the warm-caches family's next step.)

A parent process (the supervisor's place) holds a harness Timer and runs its eviction (the
instruction-cache sweep, then the L2 read sweep) when a child asks. The child (the worker's
place) times calls with CUPTI in three ways, alternating:
- own:    the child's Timer sweeps before each call, as the harness does today;
- none:   no sweep at all (warm caches);
- remote: no sweep of its own; before each call it asks the parent to sweep and waits.
If `remote` reads as `own` and far from `none`, the sweeps can move out of the solution's process.

    python3 bench/research/sweep_from_another_context.py [--out result.json]
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time

from probe_result import emit, out_path

CALLS = 60
ROUNDS = 2


def _parent(conn) -> None:
    import torch

    from gpuarena.harness.device.timing import Timer

    timer = Timer(torch.device("cuda"))
    conn.send(timer.eviction)
    while conn.recv() == "sweep":
        timer.between()  # evicts and waits for the device
        conn.send("swept")


def _ops(torch):
    a, b = (torch.randn(512, 512, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    x, y = (torch.randn(1 << 16, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    big = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    return {
        "matmul-512": lambda i: a @ b,
        "add-64K": lambda i: x + y,
        "softmax-4096x4096": lambda i: torch.softmax(big, dim=-1),
    }


def main() -> None:
    out = out_path(__doc__)
    context = mp.get_context("spawn")
    ours, theirs = context.Pipe()
    parent = context.Process(target=_parent, args=(theirs,), daemon=True)
    parent.start()
    eviction = ours.recv()

    import torch

    from gpuarena.harness.device.timing import Timer

    own, none = Timer(torch.device("cuda")), Timer(torch.device("cuda"), evict=False, icache=False)

    def remote_sweep(i: int) -> None:
        ours.send("sweep")
        assert ours.recv() == "swept"

    result: dict[str, object] = {
        "device": torch.cuda.get_device_name(0),
        "date": time.strftime("%Y-%m-%d"),
        "eviction": eviction,
        "calls": CALLS,
        "medians_us": {},
    }
    medians: dict[str, dict[str, list[float]]] = {}
    for name, call in _ops(torch).items():
        rows = medians.setdefault(name, {"own": [], "none": [], "remote": []})
        for _ in range(ROUNDS):
            for how in ("own", "none", "remote"):
                timer = own if how == "own" else none
                samples = timer.run_block(call, CALLS, prepare=remote_sweep if how == "remote" else None)
                rows[how].append(round(statistics.median(samples.device_ns) / 1e3, 3))
        print(name, rows, flush=True)
    result["medians_us"] = medians
    ours.send("quit")
    emit(result, out)


if __name__ == "__main__":
    main()
