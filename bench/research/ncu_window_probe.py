"""Where the range timer and ncu part on small kernels: the same counters read both ways, under
several cache and idle conditions, so a difference can be put on the clock, the caches or the
launch. Issue 3's open question: the range timer reads matmul 512³ 8-10% under ncu.

For each op, one fresh process per condition reads, per call, through the range timer:
  duration alone (the production configuration, one pass), and
  duration, elapsed SM cycles, SM clock and DRAM bytes read (may take several passes).
Conditions: `sweep` (the harness's L2 read sweep before each call), `nosweep` (no sweep: the
last call's lines stay in L2), `idle` (sweep, then the GPU left idle 2 ms before the call, as
between ncu's replays), and the sweep after a kernel of 236 KB of code (`+code`: the SMs'
instruction caches) or a read of one byte per 64 KB over 16 GB (`+tlb`: address
translations), or both. ncu then profiles the same op with the same metrics, with
`--cache-control all` and `none` (`--clock-control none` always).

    python3 bench/research/ncu_window_probe.py --ops add-64K,matmul-512 --out $OUT

On a CUDA machine with CUPTI 12.6+ and ncu; prints a table and writes ncu-window-probe.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: fidelity_methods
from fidelity import child_env, find_ncu, to_ns
from fidelity_methods import _import_gpuarena, make_call

SCRIPT = Path(__file__).resolve()
DURATION = "gpu__time_duration.sum"
EXPLAIN = (DURATION, "gpc__cycles_elapsed.max", "smsp__cycles_elapsed.avg.per_second", "dram__bytes_read.sum")
CONDITIONS = ("sweep", "nosweep", "idle", "sweep+code", "sweep+tlb", "sweep+code+tlb")
IDLE_S = 0.002
TLB_BYTES, TLB_STRIDE = 16 << 30, 64 << 10  # one byte read per 64 KB over 16 GB: 8192 2-MB pages


def code_sweep() -> Callable[[], None]:
    """The harness's instruction-cache sweep (harness/device/icache_sweep.py: 236 KB of straight-line
    code on every SM), so the call's instructions are no longer in the SMs' instruction caches
    (the L2 sweep after it takes them out of L2 too). The recorded run (commit 7216c23) used a
    Triton kernel of the same 8192 FMAs instead, which took minutes to compile."""
    import torch

    _import_gpuarena()
    from gpuarena.harness.device import icache_sweep

    sweep, why = icache_sweep.build(torch.device("cuda"))
    if sweep is None:
        raise RuntimeError(why)
    return sweep


def tlb_sweep() -> Callable[[], None]:
    """One byte read per 64 KB over 16 GB, so the measured call's address translations are no
    longer cached (the data read is a few MB, so it leaves L2 nearly as it was)."""
    import torch

    buf = torch.empty(TLB_BYTES, dtype=torch.uint8, device="cuda")
    return lambda: buf[::TLB_STRIDE].sum()


def child(op: str, condition: str, metrics: tuple[str, ...], calls: int) -> dict[str, Any]:
    """Per-call sums (mean over a call's kernels for rates) of `metrics`, medians over calls."""
    import torch

    _import_gpuarena()
    from gpuarena.harness.device.nvidia import l2_read_sweep
    from gpuarena.harness.device.range_timer import KernelDurations

    call, data_sweep = make_call(op, 8), l2_read_sweep(torch.device("cuda"))  # L2 alone: the conditions add the rest
    parts = ([code_sweep()] if "code" in condition else []) + ([tlb_sweep()] if "tlb" in condition else [])
    parts += [data_sweep] if condition != "nosweep" else []

    def sweep() -> None:
        for part in parts:
            part()

    for i in range(5):
        sweep()
        call(i)
    torch.cuda.synchronize()
    per_call: dict[str, list[float]] = {m: [] for m in metrics}
    with KernelDurations(torch.cuda.current_device(), metrics=metrics) as timer:
        for i in range(calls):
            sweep()
            torch.cuda.synchronize()
            if condition == "idle":
                time.sleep(IDLE_S)
            rows = timer.measure_metrics(lambda: call(i))
            for m in metrics:
                values = [r[m] for r in rows]
                per_call[m].append(statistics.fmean(values) if m.endswith(".per_second") else sum(values))
    return {m: statistics.median(v) for m, v in per_call.items()}


def parse_metrics_csv(text: str, metrics: tuple[str, ...]) -> dict[str, list[float]]:
    """ncu's --csv --print-units base rows, per metric in launch order; times in ns, other
    metrics in their base unit (cycles, bytes, per second)."""
    header: dict[str, int] | None = None
    out: dict[str, list[tuple[int, float]]] = {m: [] for m in metrics}
    for rec in csv.reader(line for line in text.splitlines() if line.startswith('"')):
        if "Metric Value" in rec and "Metric Name" in rec:
            header = {name: i for i, name in enumerate(rec)}
            continue
        if header is None or len(rec) < len(header) or rec[header["Metric Name"]] not in out:
            continue
        unit, value = rec[header["Metric Unit"]], rec[header["Metric Value"]]
        try:
            number = to_ns(value, unit)
        except ValueError:  # not a time: base units need no scaling
            number = float(value.replace(",", ""))
        out[rec[header["Metric Name"]]].append((int(rec[header["ID"]].replace(",", "")), number))
    return {m: [v for _, v in sorted(rows)] for m, rows in out.items()}


def run_ncu(ncu: str, op: str, metrics: tuple[str, ...], cache: str, calls: int) -> dict[str, Any]:
    cmd = [
        ncu,
        "--metrics",
        ",".join(metrics),
        "--clock-control",
        "none",
        "--cache-control",
        cache,
        "--csv",
        "--print-units",
        "base",
        "--nvtx",
        "--nvtx-include",
        "fidelity_call/",
        sys.executable,
        str(SCRIPT.with_name("fidelity.py")),
        "--ncu-child",
        op,
        "--calls",
        str(calls),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(LC_ALL="C"), timeout=300)
    rows = parse_metrics_csv(p.stdout + "\n" + p.stderr, metrics)
    if not rows[DURATION]:
        return {"error": f"exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}"}
    return {m: statistics.median(v) for m, v in rows.items() if v} | {"kernels": len(rows[DURATION])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", default="add-64K,matmul-512")
    ap.add_argument("--calls", type=int, default=100)
    ap.add_argument("--conditions", default=",".join(CONDITIONS))
    ap.add_argument("--metric-sets", default="duration,explain", help="duration, explain or both")
    ap.add_argument("--ncu", default="all,none", help="ncu cache-control settings to run ('' for none)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", nargs=3, metavar=("OP", "CONDITION", "METRICS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        op, condition, metrics = args.child
        print(json.dumps(child(op, condition, tuple(metrics.split(",")), args.calls)))
        return
    results: list[dict[str, Any]] = []
    ncu = find_ncu()
    for op in args.ops.split(","):
        sets = [{"duration": (DURATION,), "explain": EXPLAIN}[k] for k in args.metric_sets.split(",")]
        for condition in args.conditions.split(","):
            for metrics in sets:
                cmd = [
                    sys.executable,
                    str(SCRIPT),
                    "--calls",
                    str(args.calls),
                    "--child",
                    op,
                    condition,
                    ",".join(metrics),
                ]
                p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=300)
                line = next((x for x in p.stdout.splitlines() if x.startswith("{")), None)
                got = json.loads(line) if line else {"error": p.stderr[-1500:]}
                results.append({"op": op, "how": f"range timer, {condition}", "metrics": len(metrics)} | got)
                print(json.dumps(results[-1]), flush=True)
        for cache in filter(None, args.ncu.split(",")):
            for metrics in sets:
                got = run_ncu(ncu, op, metrics, cache, 20) if ncu else {"error": "no ncu"}
                results.append({"op": op, "how": f"ncu, cache-control {cache}", "metrics": len(metrics)} | got)
                print(json.dumps(results[-1]), flush=True)
    print(f"\n| op | how | metrics | duration ns | SM cycles | SM clock MHz | DRAM bytes read |\n|{'---|' * 7}")
    for r in results:
        clock = r.get("smsp__cycles_elapsed.avg.per_second")
        cells = [
            r["op"],
            r["how"],
            r["metrics"],
            r.get(DURATION),
            r.get("gpc__cycles_elapsed.max"),
            clock and clock / 1e6,
            r.get("dram__bytes_read.sum"),
            r.get("error", "")[:80],
        ]
        print(
            "| " + " | ".join("" if c is None else f"{c:.1f}" if isinstance(c, float) else str(c) for c in cells) + " |"
        )
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "ncu-window-probe.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
