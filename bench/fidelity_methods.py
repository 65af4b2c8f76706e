"""The ops bench/fidelity.py times and the methods it times them with, each run in a child
process of its own on a CUDA machine (`bench/fidelity.py --method M --op OP`), and the process
ncu profiles (`--ncu-child OP`). torch, triton and gpuarena are imported inside the functions,
so this module imports on a CPU-only box.
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OPS = ("add-64K", "add-16M", "softmax-8192x8192", "layernorm-16384x4096", "matmul-512", "matmul-4096")
METHODS = ("gpuarena", "triton", "events", "held", "hw")
NVTX_RANGE = "fidelity_call"
KERNELS_TAG = "FIDELITY_KERNELS_PER_CALL="


@dataclass(frozen=True)
class Budget:
    """How much each method measures; --quick shrinks it for a smoke run."""

    max_samples: int = 400
    block: int = 50
    triton_rep: int = 200
    event_calls: int = 200
    ncu_calls: int = 20


FULL, QUICK = Budget(), Budget(max_samples=100, triton_rep=50, event_calls=50, ncu_calls=5)


def _import_gpuarena() -> None:
    """gpuarena as installed, else this checkout's src/."""
    try:
        import gpuarena  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))


def _harness_sweep() -> Callable[[], None]:
    """The harness's own eviction (Timer.evict_caches: instruction caches, then an L2 read
    sweep), so every method starts each call from the same cache state as gpuarena's."""
    import torch

    _import_gpuarena()
    from gpuarena.harness.device.timing import Timer

    return Timer(torch.device("cuda")).evict_caches


def make_call(op: str, n_sets: int) -> Callable[[int], Any]:
    """call(i) runs `op` on input set i % n_sets: random bf16 inputs (never zeros)."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)

    def rn(*shape: int) -> Any:
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)

    fn: Callable[..., Any]
    sets: list[tuple[Any, ...]]
    if op in ("add-64K", "add-16M"):
        n = 1 << 16 if op == "add-64K" else 1 << 24
        sets, fn = [(rn(n), rn(n)) for _ in range(n_sets)], lambda x, y: x + y
    elif op == "softmax-8192x8192":
        sets, fn = [(rn(8192, 8192),) for _ in range(n_sets)], lambda x: torch.softmax(x, -1)
    elif op == "layernorm-16384x4096":
        sets = [(rn(16384, 4096), rn(4096), rn(4096)) for _ in range(n_sets)]
        fn = lambda x, w, b: F.layer_norm(x, (4096,), w, b)  # noqa: E731
    elif op in ("matmul-512", "matmul-4096"):
        n = int(op.split("-")[1])
        sets, fn = [(rn(n, n), rn(n, n)) for _ in range(n_sets)], torch.matmul
    else:
        raise ValueError(f"unknown op {op!r}; known: {', '.join(OPS)}")
    torch.cuda.synchronize()
    return lambda i: fn(*sets[i % n_sets])


def measure_gpuarena(op: str, b: Budget) -> dict[str, Any]:
    """The harness itself: Timer.run_block over 8 rotated input sets until the median's 95%
    interval is within ±1% (stats.converged, at least 50 samples) or max_samples."""
    import torch

    _import_gpuarena()
    from gpuarena.harness.device.timing import Timer
    from gpuarena.harness.stats import bootstrap_median, converged

    call, timer = make_call(op, 8), Timer(torch.device("cuda"))
    timer.run_block(call, 5)  # warm-up: sweep buffer, cuBLAS handle, allocator; discarded
    dev: list[int] = []
    e2e: list[int] = []
    while len(dev) < b.max_samples:
        s = timer.run_block(call, min(b.block, b.max_samples - len(dev)))
        dev += s.device_ns
        e2e += s.e2e_ns
        if converged(dev, min_samples=50):
            break
    m = bootstrap_median(dev)
    return {
        "us": m.median / 1e3,
        "low_us": m.low / 1e3,
        "high_us": m.high / 1e3,
        "e2e_us": statistics.median(e2e) / 1e3,
        "n": len(dev),
        "timer_method": timer.method,
        "device_ns": dev,
        "e2e_ns": e2e,
    }


def measure_triton(op: str, b: Budget) -> dict[str, Any]:
    """triton's own benchmark: L2 flushed by writing a buffer, events around each call."""
    import triton.testing

    call = make_call(op, 1)
    ms = triton.testing.do_bench(lambda: call(0), warmup=25, rep=b.triton_rep, return_mode="median")
    return {"us": ms * 1e3, "triton_version": triton.__version__}


def measure_events(op: str, b: Budget) -> dict[str, Any]:
    """Per call: zero 256 MB (the write flush), event, call, event. No sync per call, so the
    flush hides the host's launch latency as in do_bench; the write-back is still billed."""
    import torch

    call, buf = make_call(op, 8), torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for i in range(10):
        buf.zero_()
        call(i)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(b.event_calls)]
    for i, (start, end) in enumerate(pairs):
        buf.zero_()
        start.record()
        call(i)
        end.record()
    torch.cuda.synchronize()
    us = [start.elapsed_time(end) * 1e3 for start, end in pairs]
    return {"us": statistics.median(us), "calls_us": us}


HOLD_US = (50.0, 200.0)
"""How long the spin kernel holds the stream before each call in `held`; two values, so a hold
too short for the host to enqueue the call shows up as a difference between them."""


def measure_held(op: str, b: Budget) -> dict[str, Any]:
    """Per call: read sweep (as gpuarena's), a spin kernel (torch.cuda._sleep) that holds the
    stream while the host enqueues, event, call, event, sync. The GPU never waits for the host,
    so the pair spans the call as the GPU runs it launched alone (launch processing, execution,
    drain), which is what ncu's serialised gpu__time_duration sees, and not the host's launch
    latency that plain events bill."""
    import torch

    call, sweep = make_call(op, 8), _harness_sweep()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(10_000_000)
    end.record()
    torch.cuda.synchronize()
    cycles_per_us = 10_000_000 / (start.elapsed_time(end) * 1e3)

    def held(hold_us: float, work: Callable[[int], Any]) -> float:
        cycles = int(hold_us * cycles_per_us)
        pairs = [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(b.event_calls)
        ]
        for i, (s, e) in enumerate([(None, None)] * 10 + pairs):  # 10 warm-up calls, untimed
            sweep()
            torch.cuda._sleep(cycles)
            if s is not None:
                s.record()
            work(i)
            if e is not None:
                e.record()
            torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) * 1e3 for s, e in pairs)

    by_hold = {f"{hold_us:g}": held(hold_us, call) for hold_us in HOLD_US}
    empty = held(HOLD_US[-1], lambda i: None)  # the event pair's own cost, nothing between
    us = by_hold[f"{HOLD_US[-1]:g}"]
    return {"us": us, "us_by_hold": by_hold, "empty_us": empty, "net_us": us - empty, "cycles_per_us": cycles_per_us}


def measure_hw(op: str, b: Budget) -> dict[str, Any]:
    """gpuarena's ncu-comparable figure, taken as records take it (Timing.kernel_duration_us):
    the harness's Timer with the range timer's library, so each call, after the harness's own
    eviction, gives the sum of its kernels' gpu__time_duration (ncu's counter, read in-process
    through CUPTI's Range Profiler, each kernel launched alone)."""
    import torch

    _import_gpuarena()
    from gpuarena.harness import kernel_duration
    from gpuarena.harness.device.timing import Timer

    library, why = kernel_duration.library()
    if library is None:
        raise RuntimeError(why)
    call, timer = make_call(op, 8), Timer(torch.device("cuda"))
    timer.run_block(call, 5)  # warm-up: sweep buffers, cuBLAS handle, allocator; discarded
    per_call: list[int] = []
    timer.open_kernel_profiler(library)  # held for every block, as a run's phase holds it
    try:
        while len(per_call) < b.event_calls:
            per_call += timer.run_block(
                call, min(b.block, b.event_calls - len(per_call)), kernel_library=library
            ).device_ns
    finally:
        timer.close_kernel_profiler()
    return {"us": statistics.median(per_call) / 1e3, "n": len(per_call), "timer_eviction": timer.eviction}


MEASURE = {
    "gpuarena": measure_gpuarena,
    "triton": measure_triton,
    "events": measure_events,
    "held": measure_held,
    "hw": measure_hw,
}


def ncu_child(op: str, n_calls: int, count_kernels: bool) -> None:
    """What ncu profiles: inputs and warm-up outside any NVTX range, then n_calls calls each in
    range NVTX_RANGE, launching nothing after them (the fallback takes the last rows)."""
    import torch

    call = make_call(op, 1)
    for _ in range(3):
        call(0)
    torch.cuda.synchronize()
    if count_kernels:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call(0)
            torch.cuda.synchronize()
        names = [
            e.name() for e in prof.profiler.kineto_results.events() if e.device_type() != torch.autograd.DeviceType.CPU
        ]
        print(f"{KERNELS_TAG}{sum(not n.startswith(('Memcpy', 'Memset')) for n in names)}", flush=True)
    for _ in range(n_calls):
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        call(0)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
