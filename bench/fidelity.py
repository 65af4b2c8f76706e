#!/usr/bin/env python3
"""Timing fidelity: gpuarena's device time against ncu, triton's do_bench, CUDA events, events
around a call launched alone (held) and gpuarena's in-process reading of ncu's counter (hw).

Why: DESIGN.md ("Measuring time on a GPU") claims that per-call CUPTI device time after a
read-only L2 eviction tracks ncu's kernel duration within a few percent, where events after
a write flush do not. This checks it on the GPU at hand, each repetition a fresh process:
    python3 bench/fidelity.py [--ops add-16M,matmul-4096] [--methods gpuarena,hw] [--reps 3] [--out DIR] [--quick]
Child modes (the ops and methods are in fidelity_methods.py): ``--method M[,M] --op OP``
prints one JSON line per method; ``--ncu-child OP`` is what ncu profiles. torch, triton and gpuarena are imported lazily, so the parsing and
summary helpers (tests/test_fidelity_parsing.py) import on a CPU-only box.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import glob
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
sys.path.insert(0, str(SCRIPT.parent))
from fidelity_methods import FULL, KERNELS_TAG, MEASURE, METHODS, NVTX_RANGE, OPS, QUICK, ncu_child  # noqa: E402

NCU_METRIC = "gpu__time_duration.sum"
UNIT_NS = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9}
TARGET_MAX, TARGET_MEDIAN = 0.05, 0.02  # |gpuarena/ncu - 1|: every op, median over ops
SPREAD_BIG, SPREAD_SMALL, SMALL_US = 0.01, 0.03, 20.0  # max/min - 1 over repetitions


# -- ncu output (pure, tested on the CPU) ----------------------------------------------------
@dataclass(frozen=True)
class KernelRow:
    pid: str
    id: int
    name: str
    ns: float


def to_ns(value: str, unit: str) -> float:
    """ncu scales units per value (nsecond/usecond/msecond) and may group thousands with ','."""
    scale = UNIT_NS.get(unit.strip().lower())
    if scale is None:
        raise ValueError(f"unknown time unit {unit!r} in ncu output")
    return float(value.strip().replace(",", "")) * scale


def parse_ncu_csv(text: str, metric: str = NCU_METRIC) -> list[KernelRow]:
    """Rows of `metric` in launch order. ncu's stdout mixes the app's output and ==PROF== lines
    with the CSV, so only lines starting with a quote are read; columns are found by name."""
    header: dict[str, int] | None = None
    rows: list[KernelRow] = []
    for rec in csv.reader(line for line in text.splitlines() if line.startswith('"')):
        if "Metric Value" in rec and "Metric Name" in rec:
            header = {name: i for i, name in enumerate(rec)}
            continue
        if header is None or len(rec) < len(header) or rec[header["Metric Name"]] != metric:
            continue
        pid = rec[header["Process ID"]] if "Process ID" in header else ""
        rows.append(
            KernelRow(
                pid,
                int(rec[header["ID"]].replace(",", "")),
                rec[header["Kernel Name"]],
                to_ns(rec[header["Metric Value"]], rec[header["Metric Unit"]]),
            )
        )
    return sorted(rows, key=lambda r: (r.pid, r.id))


def parse_kernel_count(stdout: str) -> int | None:
    """The child's own line: how many kernels one call launched (torch.profiler)."""
    found = re.findall(re.escape(KERNELS_TAG) + r"(\d+)", stdout)
    return int(found[-1]) if found else None


def group_calls(rows: list[KernelRow], n_calls: int, per_call: int | None = None) -> tuple[list[float], int]:
    """Sum the kernels of each measured call; returns (ns per call, kernels per call).

    per_call None: the rows are exactly the measured calls (NVTX filter), so per_call is
    len(rows) / n_calls. Otherwise the measured calls are the last n_calls * per_call rows
    (the child launches nothing after them). Each call must launch the same kernel names,
    else the grouping is wrong and the numbers would be too.
    """
    if per_call is None:
        if n_calls <= 0 or not rows or len(rows) % n_calls:
            raise ValueError(f"{len(rows)} ncu kernel rows do not split into {n_calls} calls")
        per_call = len(rows) // n_calls
    if per_call <= 0 or len(rows) < n_calls * per_call:
        raise ValueError(f"{len(rows)} ncu kernel rows, expected {n_calls} x {per_call}")
    rows = rows[len(rows) - n_calls * per_call :]
    groups = [rows[i * per_call : (i + 1) * per_call] for i in range(n_calls)]
    first = [r.name for r in groups[0]]
    for i, g in enumerate(groups[1:], 1):
        if [r.name for r in g] != first:
            raise ValueError(f"call {i} launched {[r.name for r in g]}, call 0 launched {first}")
    return [sum(r.ns for r in g) for g in groups], per_call


# -- summary and table (pure, tested on the CPU) --------------------------------------------
def spread(values: list[float]) -> float | None:
    """max/min - 1 over repetitions: how far a fresh process can move the number."""
    return max(values) / min(values) - 1 if values and min(values) > 0 else None


VERDICT_METHODS = ("gpuarena", "hw")
"""The harness's two figures, judged against the targets: the stream cost the leaderboards
rank by, and the ncu Duration records carry beside it. The other methods are context."""


def _verdict(table: list[dict[str, Any]], method: str) -> dict[str, Any]:
    """`method`'s ratios to ncu and spreads over the ops against the targets."""
    devs, spreads_ok = [], []
    for row in table:
        m = row["methods"][method]
        if m["ratio"] is not None:
            devs.append(abs(m["ratio"] - 1))
        size = row["ncu_us"] if row["ncu_us"] is not None else m["us"]
        target = SPREAD_SMALL if size is not None and size < SMALL_US else SPREAD_BIG
        spreads_ok.append(m["spread"] is not None and m["spread"] <= target)
    complete = bool(table) and len(devs) == len(table)
    max_dev, med_dev = (max(devs), statistics.median(devs)) if devs else (None, None)
    verdict = {
        "ncu_available": bool(devs),
        "max_abs_dev": max_dev,
        "median_abs_dev": med_dev,
        "max_ok": complete and max_dev <= TARGET_MAX,
        "median_ok": complete and med_dev <= TARGET_MEDIAN,
        "spread_ok": bool(table) and all(spreads_ok),
    }
    verdict["all_ok"] = verdict["max_ok"] and verdict["median_ok"] and verdict["spread_ok"]
    return verdict


def summarize(runs: list[dict[str, Any]], ops: Iterable[str]) -> dict[str, Any]:
    """Per op: ncu and each method's median over repetitions, ratio to ncu and spread; then
    the verdicts against the targets (gpuarena's top level, hw's under "hw")."""

    def reps(op: str, method: str, key: str = "us") -> list[float]:
        return [r[key] for r in runs if r["op"] == op and r["method"] == method and r.get(key) is not None]

    table = []
    for op in ops:
        ncu = reps(op, "ncu")
        ncu_us = statistics.median(ncu) if ncu else None
        row: dict[str, Any] = {"op": op, "ncu_us": ncu_us, "ncu_reps": ncu, "ncu_spread": spread(ncu), "methods": {}}
        for m in METHODS:
            v = reps(op, m)
            us = statistics.median(v) if v else None
            row["methods"][m] = {
                "us": us,
                "reps": v,
                "spread": spread(v),
                "ratio": us / ncu_us if us is not None and ncu_us else None,
            }
        e2e = reps(op, "gpuarena", "e2e_us")
        row["gpuarena_e2e_us"] = statistics.median(e2e) if e2e else None
        g = row["methods"]["gpuarena"]
        size = ncu_us if ncu_us is not None else g["us"]
        row["spread_target"] = SPREAD_SMALL if size is not None and size < SMALL_US else SPREAD_BIG
        row["spread_ok"] = g["spread"] is not None and g["spread"] <= row["spread_target"]
        row["ratio_ok"] = None if g["ratio"] is None else abs(g["ratio"] - 1) <= TARGET_MAX
        table.append(row)
    summary = _verdict(table, "gpuarena") | {"hw": _verdict(table, "hw")}
    return {"ops": table, "summary": summary}


def _fmt(x: float | None, kind: str) -> str:
    """µs with 2 decimals below 100 and 1 above, ratios with 3, fractions as percent."""
    if x is None:
        return "–"
    return {"us": f"{x:.2f}" if x < 100 else f"{x:.1f}", "ratio": f"{x:.3f}", "pct": f"{100 * x:.1f}%"}[kind]


def render_markdown(result: dict[str, Any]) -> str:
    """The table (µs: median over repetitions; ×ncu: ratio; spread: max/min - 1) and verdict."""
    head = [
        "op",
        "ncu µs",
        "ncu spread",
        "gpuarena µs",
        "×ncu",
        "spread",
        "gpuarena e2e µs",
        "triton µs",
        "×ncu",
        "spread",
        "events µs",
        "×ncu",
        "spread",
        "held µs",
        "×ncu",
        "spread",
        "hw µs",
        "×ncu",
        "spread",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in result["ops"]:
        cells = [row["op"], _fmt(row["ncu_us"], "us"), _fmt(row["ncu_spread"], "pct")]
        for m in METHODS:
            r = row["methods"][m]
            cells += [_fmt(r["us"], "us"), _fmt(r["ratio"], "ratio"), _fmt(r["spread"], "pct")]
            if m == "gpuarena":
                cells.append(_fmt(row["gpuarena_e2e_us"], "us"))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if not result["summary"]["ncu_available"] and not result["summary"]["hw"]["ncu_available"]:
        lines.append("- ncu: missing, so no ratios and no verdict on accuracy.")
    for method, what in (("gpuarena", "the stream cost, ranked"), ("hw", "the ncu Duration records carry")):
        s = result["summary"] if method == "gpuarena" else result["summary"]["hw"]
        if not any(r["methods"][method]["reps"] for r in result["ops"]):
            continue
        lines.append(f"- **{method}** ({what}):")
        if s["ncu_available"]:
            lines.append(
                f"  - max |{method}/ncu − 1| over ops: {_fmt(s['max_abs_dev'], 'pct')} "
                f"(target ≤ {TARGET_MAX:.0%}): {_pass(s['max_ok'])}"
            )
            lines.append(
                f"  - median |{method}/ncu − 1| over ops: {_fmt(s['median_abs_dev'], 'pct')} "
                f"(target ≤ {TARGET_MEDIAN:.0%}): {_pass(s['median_ok'])}"
            )
        per_op = ", ".join(f"{r['op']} {_fmt(r['methods'][method]['spread'], 'pct')}" for r in result["ops"])
        lines.append(
            f"  - spread over repetitions (≤ {SPREAD_SMALL:.0%} under {SMALL_US:g} µs, "
            f"≤ {SPREAD_BIG:.0%} above): {per_op}: {_pass(s['spread_ok'])}"
        )
    return "\n".join(lines) + "\n"


def _pass(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# -- the parent: fresh processes, ncu, the report --------------------------------------------
def child_env(**extra: str) -> dict[str, str]:
    """Children import gpuarena from this checkout's src/ first, installed or not."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return env


def _tail(text: str, n: int = 1500) -> str:
    return text[-n:].strip()


def run_methods(op: str, methods: list[str], quick: bool, timeout: float = 300) -> list[dict[str, Any]]:
    """One fresh process runs `methods` on `op`; a missing line becomes an error record."""
    cmd = [sys.executable, str(SCRIPT), "--method", ",".join(methods), "--op", op] + (["--quick"] if quick else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(), timeout=timeout)
        out = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
        why = f"exit {p.returncode}: {_tail(p.stderr)}"
    except subprocess.TimeoutExpired:
        out, why = [], f"timed out after {timeout:.0f}s"
    got = {r["method"] for r in out}
    return out + [{"op": op, "method": m, "error": why} for m in methods if m not in got]


def find_ncu() -> str | None:
    found = shutil.which("ncu")
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True) + ["/usr/local/cuda/bin/ncu"]
    return found or next((c for c in candidates if os.access(c, os.X_OK)), None)


def ncu_command(ncu: str, op: str, n_calls: int, nvtx: bool) -> list[str]:
    # FIDELITY_NCU_CACHE_CONTROL=none shows how much of ncu's figure is its cache flush
    cache = os.environ.get("FIDELITY_NCU_CACHE_CONTROL", "all")
    cmd = [
        ncu,
        "--metrics",
        NCU_METRIC,
        "--clock-control",
        "none",
        "--cache-control",
        cache,
        "--csv",
        "--target-processes",
        "all",
    ]
    cmd += ["--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"] if nvtx else []
    cmd += [sys.executable, str(SCRIPT), "--ncu-child", op, "--calls", str(n_calls)]
    return cmd + ([] if nvtx else ["--count-kernels"])


def run_ncu(ncu: str, op: str, n_calls: int, timeout: float = 300) -> dict[str, Any]:
    """ncu's kernel durations for n_calls calls, summed per call. First with an NVTX filter; if
    that profiles nothing (no error either), profile everything and take the last calls."""
    record: dict[str, Any] = {"op": op, "method": "ncu"}
    try:
        for nvtx in (True, False):
            cmd = ncu_command(ncu, op, n_calls, nvtx)
            # LC_ALL=C: '.' as the decimal point; the CSV is read from stdout and stderr alike.
            p = subprocess.run(cmd, capture_output=True, text=True, env=child_env(LC_ALL="C"), timeout=timeout)
            text = p.stdout + "\n" + p.stderr
            rows = parse_ncu_csv(text)
            record.update(command=shlex.join(cmd), filter="nvtx" if nvtx else "tail")
            if rows or "==ERROR==" in text:
                break
        if not rows:
            return record | {"error": f"ncu gave no {NCU_METRIC} rows (exit {p.returncode}): {_tail(text)}"}
        per_call = None if record["filter"] == "nvtx" else parse_kernel_count(text)
        if record["filter"] == "tail" and not per_call:
            return record | {"error": "no NVTX rows and no kernel count from the child"}
        calls_ns, k = group_calls(rows, n_calls, per_call)
    except (subprocess.TimeoutExpired, ValueError) as e:
        return record | {"error": str(e)}
    names = [r.name for r in rows[-n_calls * k :][:k]]
    return record | {
        "us": statistics.median(calls_ns) / 1e3,
        "kernels_per_call": k,
        "kernels": names,
        "calls_ns": calls_ns,
    }


STATE = "clocks.sm,clocks.mem,temperature.gpu,power.draw"  # the drift that repetitions expose


def _smi(fields: str) -> dict[str, str]:
    """nvidia-smi's values for the first GPU, by field name; empty without nvidia-smi."""
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True, text=True, timeout=30
        ).stdout
        return dict(zip(fields.split(","), (f.strip() for f in out.splitlines()[0].split(","))))
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return {}


def environment(ncu: str | None) -> dict[str, Any]:
    import importlib.metadata as md

    import torch

    smi = _smi("name,uuid,driver_version")
    try:
        triton_version: str | None = md.version("triton")
    except md.PackageNotFoundError:
        triton_version = None
    ncu_version = ncu and subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
    ncu_version = ncu_version.splitlines()[-1] if ncu_version else None  # "Version 2025.x.y.z (build ...)"
    return {
        "device": smi.get("name") or torch.cuda.get_device_name(0),
        "uuid": smi.get("uuid"),
        "driver": smi.get("driver_version"),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "triton": triton_version,
        "python": sys.version.split()[0],
        "ncu": ncu,
        "ncu_version": ncu_version,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, *sys.argv]),
        "state_before": _smi(STATE),
    }


def parent(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        print("fidelity: no CUDA device here; run this on the GPU machine.", file=sys.stderr)
        return 2
    ops = args.ops.split(",") if args.ops else list(OPS)
    if unknown := [o for o in ops if o not in OPS]:
        print(f"fidelity: unknown ops {unknown}; known: {', '.join(OPS)}", file=sys.stderr)
        return 2
    budget, reps = (QUICK if args.quick else FULL), args.reps or (1 if args.quick else 3)
    methods = args.methods.split(",") if args.methods else list(METHODS)
    if unknown := [m for m in methods if m not in METHODS]:
        print(f"fidelity: unknown methods {unknown}; known: {', '.join(METHODS)}", file=sys.stderr)
        return 2
    ncu = find_ncu()
    env = environment(ncu)
    print(f"fidelity on {env['device']}: ops {ops}, {reps} repetitions, ncu {ncu or 'MISSING'}", file=sys.stderr)
    t0, runs = time.monotonic(), []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "fidelity-" + re.sub(r"[^A-Za-z0-9._-]+", "-", env["device"].strip())
    settings = asdict(budget) | {"reps": reps, "ops": ops, "quick": args.quick, "ncu_metric": NCU_METRIC}

    def write(done: int) -> str:
        """The results so far: a run cut by a time limit keeps what it measured."""
        timers = sorted({r["timer_method"] for r in runs if "timer_method" in r})
        env.update(state_after=_smi(STATE), wall_s=round(time.monotonic() - t0, 1), gpuarena_timer=timers)
        result = summarize(runs, ops)
        table = render_markdown(result)
        total = reps * len(ops)
        partial = "" if done == total else f" PARTIAL: {done} of {total} op-repetitions measured."
        (out / f"{stem}.json").write_text(
            json.dumps(
                {"environment": env, "settings": settings, "runs": runs, "done": done, "total": total, **result},
                indent=1,
            )
            + "\n"
        )
        header = (
            f"# Timing fidelity on {env['device']}\n\n{env['date']}; driver {env['driver']}, torch {env['torch']}, "
            f"triton {env['triton']}, ncu {env['ncu_version'] or 'missing'}; {reps} repetitions; "
            f"gpuarena timer {', '.join(timers) or '?'}; {env['wall_s']} s.{partial}\n\n`{env['command']}`\n\n"
        )
        errors = "".join(
            f"- error, {r['op']} {r['method']} rep {r['rep'] + 1}: {r['error'][:300]}\n" for r in runs if "error" in r
        )
        (out / f"{stem}.md").write_text(header + table + errors)
        return table

    for rep in range(reps):  # repetitions outermost, so drift over the run shows up as spread
        for k, op in enumerate(ops):
            new = [] if "gpuarena" not in methods else run_methods(op, ["gpuarena"], args.quick)
            if others := [m for m in methods if m != "gpuarena"]:
                new += run_methods(op, others, args.quick)
            if ncu:
                new.append(run_ncu(ncu, op, budget.ncu_calls))
            for run in new:
                run["rep"] = rep
                what = f"{run['us']:.2f} µs" if "us" in run else f"ERROR {run.get('error', '')[:300]}"
                print(f"[rep {rep + 1}/{reps}] {op:22s} {run['method']:9s} {what}", file=sys.stderr, flush=True)
            runs += new
            table = write(rep * len(ops) + k + 1)
    print(table + f"\nwrote {out / stem}.json and .md", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Compare gpuarena's GPU timing with ncu, triton do_bench and CUDA events.")
    p.add_argument("--ops", help=f"comma-separated subset of: {', '.join(OPS)} (default: all)")
    p.add_argument("--reps", type=int, help="independent repetitions per method (default 3; 1 with --quick)")
    p.add_argument("--out", default=str(REPO / "bench" / "results"), help="directory for the .json and .md results")
    p.add_argument("--methods", help=f"comma-separated subset of: {', '.join(METHODS)} (default: all; ncu always)")
    p.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, fewer samples and calls")
    p.add_argument("--method", help="(child) comma-separated methods to run in this process")
    p.add_argument("--op", help="(child) the op for --method")
    p.add_argument("--ncu-child", metavar="OP", help="(child) the process ncu profiles")
    p.add_argument("--calls", type=int, default=FULL.ncu_calls, help="(child) measured calls under ncu")
    p.add_argument("--count-kernels", action="store_true", help="(child) print kernels per call first")
    args = p.parse_args(argv)
    if args.ncu_child:
        ncu_child(args.ncu_child, args.calls, args.count_kernels)
        return 0
    if args.method:
        for m in args.method.split(","):
            try:
                line = {"op": args.op, "method": m} | MEASURE[m](args.op, QUICK if args.quick else FULL)
            except Exception as e:  # one failing method must not hide the others' numbers
                line = {"op": args.op, "method": m, "error": f"{type(e).__name__}: {e}"}
            print(json.dumps(line), flush=True)
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
