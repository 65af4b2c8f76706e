"""Can the supervisor see a worker's GPU time from outside? Second candidate for issue 6's open
case (a solution that rewrites the worker's reply understates its device time): CUPTI PM
sampling, which reads the GPU's performance monitors at a fixed interval for the whole
device, from a process of its own. (The first candidate, NVML GPM, failed: on an H100 its busy
time over blocks of 10-500 ms ranged from 0 to 14 x CUPTI's; bench/results/gpm-probe-NVIDIA-H100.json.)

The stand-in worker is bench/gpm_probe.py's child (blocks of calls of a known op, each call
followed by a device sync and a host pause; it reports the block's CUPTI busy time through
torch.profiler). This process stands in for the supervisor: it never imports torch (torch
loads its own libcupti), makes a CUDA context with cuda-bindings, and samples
gr__cycles_active / gr__cycles_elapsed over each block; busy time = the sum over samples of
active / elapsed x the sample's span. If that tracks CUPTI's busy time within a few percent,
the supervisor can bound a worker's claimed device time from below without trusting it.

Needs cupti-python 13.4 (and nvidia-cuda-cupti 13.4, cuda-bindings, cuda-pathfinder,
pyelftools; wheels in .whl/cupti/ for the device tool):

    python3 bench/pm_sampling_probe.py --out pm-probe.json

Result on the lent H100 (2026-11-23; driver 580.159, CUDA 13.0): no configuration accepted.
Every profiler-host call failed with ERROR_INVALID_PARAMETER, CUPTI's own sample's metric
set included, with libcupti 13.4 and with the toolkit's 13.0, with and without a
counter-availability image. The toolkit's C sample works on the same machine, so
bench/pm_sampling_cross.py uses that instead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCKS = [  # (op, calls, host pause between calls in µs)
    ("add-16M", 200, 50), ("matmul-4096", 20, 50), ("matmul-4096", 100, 50),
    ("add-64K", 500, 20), ("add-64K", 500, 200), ("idle", 1, 20000),
]
ACTIVE = ["gr__cycles_active", "sm__cycles_active", "gpc__cycles_active"]


def context(device: int) -> None:
    """A primary context made current on this thread, as PM sampling needs one."""
    from cuda.bindings import driver as cu

    if int(cu.cuInit(0)[0]):
        raise SystemExit("cuInit failed")
    err, dev = cu.cuDeviceGet(device)
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    if int(err) or int(cu.cuCtxSetCurrent(ctx)[0]):
        raise SystemExit(f"no CUDA context: {err}")


def collector(device: int, interval_ns: int) -> tuple[object, list[str], list[str]]:
    """A configured collector and the metrics it collects; the metric sets tried are recorded."""
    from cupti import pm_sampling

    tried = []
    candidates = [["gr__cycles_elapsed.max", "sm__cycles_elapsed.sum"]]  # CUPTI's own sample's set
    candidates += [[elapsed, active + rollup] for elapsed in ("gr__cycles_elapsed.max", "gpc__cycles_elapsed.max")
                   for active in ACTIVE for rollup in (".max", ".avg", ".sum")]
    for metrics in candidates:
        for buffer in (512 << 20,):
            c = pm_sampling.Collector(device_index=device)
            c.enable()
            try:
                c.configure(metrics=metrics, sampling_interval=interval_ns, hardware_buffer_size=buffer)
                if metrics == candidates[0]:  # proves the call works; keep looking for an activity metric
                    tried.append(f"{metrics}: accepted")
                    c.disable()
                    continue
                return c, metrics, tried
            except Exception as exc:  # noqa: BLE001 - record why a metric set is refused, try the next
                tried.append(f"{metrics}: {type(exc).__name__}: {exc}")
                c.disable()
    raise SystemExit("no metric set accepted:\n" + "\n".join(tried))


def busy_ms(data) -> tuple[float, int, float]:
    """Busy time (ms) over the samples, their number and the span they cover (ms)."""
    busy, span = 0.0, 0.0
    for s in data:
        elapsed, active = s.metric_values[0], s.metric_values[1]
        width = (s.end_timestamp - s.start_timestamp) / 1e6
        span += width
        if elapsed > 0:
            busy += min(active / elapsed, 1.0) * width
    return busy, len(data), span


def use_counter_availability(device: int) -> None:
    """Give the profiler host the device's counter-availability image, as CUPTI's C samples
    do: cupti-python's ProfilerHost passes none, which an H100 (driver 580) refuses with
    ERROR_INVALID_PARAMETER. Needs the profiler initialised (a Collector enabled)."""
    import weakref

    import numpy as np
    from cupti import cupti as C
    from cupti import profiler_host as ph

    query = C.PmSamplingGetCounterAvailabilityParams()
    query.struct_size = C.PM_SAMPLING_GET_COUNTER_AVAILABILITY_PARAMS_STRUCT_SIZE
    query.device_index = device
    C.pm_sampling_get_counter_availability(query.ptr)
    image = np.zeros(query.counter_availability_image_size, dtype=np.uint8)
    query.p_counter_availability_image = image.ctypes.data
    C.pm_sampling_get_counter_availability(query.ptr)

    def initialize(self) -> None:
        if self._p_host_object is not None:
            return
        params = C.ProfilerHostInitializeParams()
        params.struct_size = C.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE
        params.profiler_type = self._profiler_type
        params.p_chip_name = self._chip_name
        params.p_counter_availability_image = image.ctypes.data
        C.profiler_host_initialize(params.ptr)
        self._p_host_object = params.p_host_object
        self._finalizer = weakref.finalize(self, ph._profiler_host_deinitialize, self._p_host_object)

    initialize.image = image  # type: ignore[attr-defined]  # kept alive with the method
    ph.ProfilerHost.initialize = initialize


def base_metrics(chip: str) -> list[str]:
    """The chip's PM sampling base metrics whose name says cycles or time."""
    from cupti import profiler_host

    host = profiler_host.ProfilerHost(chip, profiler_host.ProfilerType.PM_SAMPLING)
    host.initialize()
    found = []
    try:
        for kind in profiler_host.MetricType:
            if kind.name.endswith("COUNT"):
                continue
            try:
                found += [m for m in host.get_base_metrics(kind) if "cycles" in m or "time" in m]
            except ValueError:
                continue
    finally:
        host.deinitialize()
    return found


def observe(device: int, intervals: list[int], repeats: int) -> dict:
    context(device)
    from cupti import pm_sampling

    probe = pm_sampling.Collector(device_index=device)
    probe.enable()  # initialises the profiler and finds the chip's name
    chip = probe._chip_name
    try:
        use_counter_availability(device)
        try:
            print(json.dumps({"chip": chip, "base_metrics": base_metrics(chip)}), flush=True)
        except Exception as exc:  # noqa: BLE001 - the listing is a help; the collection below is the probe
            print(json.dumps({"chip": chip, "base_metrics_error": repr(exc)}), flush=True)
    finally:
        probe.disable()
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(device), PYTHONUNBUFFERED="1")
    child = subprocess.Popen([sys.executable, str(HERE / "gpm_probe.py"), "--child"], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=env)
    assert child.stdin and child.stdout
    rows, setup = [], {}
    try:
        for interval in intervals:
            c, metrics, tried = collector(device, interval)
            setup[interval] = {"metrics": metrics, "refused": tried}
            try:
                for _ in range(repeats):
                    for op, calls, pause_us in BLOCKS:
                        child.stdin.write(f"{op} {calls} {pause_us}\n")
                        child.stdin.flush()
                        assert child.stdout.readline().strip() == "ready"
                        c.start()
                        t0 = time.perf_counter_ns()
                        child.stdin.write("go\n")
                        child.stdin.flush()
                        report = json.loads(child.stdout.readline())
                        wall = (time.perf_counter_ns() - t0) / 1e6
                        c.stop()
                        busy, samples, span = busy_ms(c.decode(max_samples=200_000))
                        cupti = report["cupti_busy_ms"]
                        row = {"interval_ns": interval, "op": op, "calls": calls, "pause_us": pause_us,
                               "wall_ms": round(wall, 3), "samples": samples, "sampled_ms": round(span, 3),
                               "cupti_busy_ms": round(cupti, 4), "pm_busy_ms": round(busy, 4),
                               "pm_over_cupti": round(busy / cupti, 4) if cupti else None}
                        print(json.dumps(row), flush=True)
                        rows.append(row)
            finally:
                c.disable()
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    return {"setup": setup, "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", type=int, default=0)
    parser.add_argument("--intervals", default="20000,5000", help="sampling intervals in ns, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    result = observe(args.gpu, [int(i) for i in args.intervals.split(",")], args.repeats)
    ratios: dict[str, list[float]] = {}
    for r in result["rows"]:
        if r["pm_over_cupti"] is not None:
            ratios.setdefault(f"{r['interval_ns']}ns {r['op']} x{r['calls']} pause {r['pause_us']}us",
                              []).append(r["pm_over_cupti"])
    result["summary"] = {k: {"median": statistics.median(v), "min": min(v), "max": max(v)} for k, v in ratios.items()}
    print(json.dumps(result["summary"], indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
