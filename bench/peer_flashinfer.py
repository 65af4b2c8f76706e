"""A whole verdict, gpuarena's beside FlashInfer-Bench's own, on the same FlashInfer-Trace
definitions, workloads and solutions, each method's time read against ncu's (issue 47: the
peers' evaluations side by side in one run on the GPU).

FlashInfer-Bench's code is not in this repository: its package `flashinfer-bench` (PyPI) is
installed where the bench runs, without its declared dependency flashinfer-python (FlashInfer's
kernels, which benchmarking a plain solution never imports): `bench/gpu/carry.sh` downloads it
with --no-deps, and docstring-parser, which its package imports at its top (agents/schema.py).
Its other imports are there already: torch, pydantic, safetensors, filelock, typing_extensions,
and triton for Triton solutions (apache-tvm-ffi only for C++/CUDA solutions bound with tvm-ffi).

    python3 bench/peer_flashinfer.py --repeat 2 --out DIR [--definitions rms_norm_bf16_h4096,...]
    python3 bench/peer_flashinfer.py --device cpu --out DIR     # the CPU check: no GPU, no FlashInfer-Bench run

The problems: a few FlashInfer-Trace definitions written for this bench (never FlashInfer's
files), each with its PyTorch reference, workloads at a model's sizes and one solution (Triton,
or plain PyTorch where cuBLAS is the kernel), written as a trace-set folder (definitions/,
solutions/, workloads/) in a scratch folder when the bench runs; nothing of it is committed.

FlashInfer-Bench's side: what its CLI's `flashinfer-bench run --local DIR` does (TraceSet.from_path,
BenchmarkConfig with the CLI's defaults: 10 warm-up runs, 50 iterations, 3 trials, atol = rtol =
1e-2, the persistent runner, a 300 s limit a solution; Benchmark.run_all), for one definition and
its solution, in a fresh Python process (`--fib-child`) on a fresh copy of the trace-set, timed from
outside (wall time). Per workload its trace's status, latency (the mean over trials of do_bench's
mean over iterations, each after a 256 MB L2 flush and on cloned inputs), the reference's latency
(its baseline is timed too) and the errors.

gpuarena's side: `gpuarena import flashinfer` of the same definition and workloads and `gpuarena
import flashinfer-solution` of the same solution, then `gpuarena run --mode ranked --device cuda
--json`, timed from outside: the record's status, phases and per workload the median device time
and the record's own ncu figure (time.kernel_duration_us).

Each verdict of either side gets an empty TRITON_CACHE_DIR of its own (both build the solution as
a new submission is built; `--shared-triton-cache` leaves the machine's), and FlashInfer-Bench its
own FIB_CACHE_PATH (its build folder and logs).

ncu: per workload, `--ncu-child` builds the same solution from its sources, draws the inputs on
the GPU and calls it inside an NVTX range under ncu, with bench/peer_kernelbench.py's settings and
its reading (peer_common's ncu_reading: fidelity.py's parser and grouping): gpu__time_duration.sum
over one call's kernels,
median over calls. Each method's reading is divided by it.

Every side runs with a time limit in its own process group (peer_common's run_process); a
side that fails, hangs or prints no result is recorded with its stderr's tail, and the bench goes
on. DIR/peer-flashinfer.json and DIR/peer-flashinfer.md are rewritten after every verdict.

Its parts: bench/peer_common.py (processes, gpuarena's side, ncu, the files; shared with
bench/peer_kernelbench.py), bench/peer_flashinfer_problems.py (the trace-set's documents, written
and read back) and bench/peer_flashinfer_fib.py (FlashInfer-Bench's side in the `--fib-child`
process, and its loader)."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
BENCH = SCRIPT.parent
sys.path.insert(0, str(BENCH))
from fidelity import child_env, find_ncu  # noqa: E402
from peer_common import (  # noqa: E402
    catch_stop,
    fmt,
    gpuarena_line,
    median_of,
    ncu_line,
    ncu_reading,
    no_result,
    print_report,
    profile_calls,
    ratio,
    result_line,
    run_gpuarena,
    run_process,
    stderr_note,
    tail,
    write_result,
)
from peer_flashinfer_fib import FIB_SETTINGS, fib_child, fib_version, validate_with_flashinfer_bench  # noqa: E402
from peer_flashinfer_problems import (  # noqa: E402
    definition_names,
    draw_arguments,
    load_documents,
    load_entry,
    paths_of,
    problems,
    write_trace_set,
)

RESULT_TAG = "PEER_FI_RESULT="
NVTX_RANGE = "peer_fi_call"


# -- results ----------------------------------------------------------------------------------
def summarize(entry: dict[str, Any]) -> dict[str, Any]:
    """Per definition: the verdicts' wall times; per workload: each method's reading over ncu's."""
    fib, ga = entry["flashinfer_bench"], entry["gpuarena"]
    s: dict[str, Any] = {
        "fib_wall_s": median_of(fib, "wall_s"),
        "ga_wall_s": median_of(ga, "wall_s"),
        "fib_status": [r.get("status") or (r.get("error") or "")[:60] for r in fib],
        "ga_status": [r.get("status") or (r.get("error") or "")[:60] for r in ga],
        "workloads": {},
    }
    s["wall_ga_over_fib"] = ratio(s["ga_wall_s"], s["fib_wall_s"])
    for w in entry.get("workloads", []):
        key = w["uuid"]
        fib_rows = [t for r in fib for t in r.get("traces", []) if t.get("workload") == key]
        ga_rows = [x for r in ga for x in r.get("workloads", []) if x.get("name") == key]
        ncu_us = ((entry.get("ncu") or {}).get(key) or {}).get("us")
        row = {
            "axes": w["axes"],
            "fib_status": [t.get("status") for t in fib_rows],
            "fib_latency_us": median_of(fib_rows, "latency_us"),
            "fib_reference_us": median_of(fib_rows, "reference_latency_us"),
            "ga_status": [x.get("status") for x in ga_rows],
            "ga_median_us": median_of(ga_rows, "median_us"),
            "ga_kernel_duration_us": median_of(ga_rows, "kernel_duration_us"),
            "ncu_us": ncu_us,
        }
        row["fib_over_ncu"] = ratio(row["fib_latency_us"], ncu_us)
        row["ga_over_ncu"] = ratio(row["ga_median_us"], ncu_us)
        row["ga_record_ncu_over_ncu"] = ratio(row["ga_kernel_duration_us"], ncu_us)
        s["workloads"][key] = row
    return s


def _axes(axes: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in axes.items())


def _workload(w: dict[str, Any]) -> str:
    return f"{w['name'][:8]} {w['status']} {fmt(w.get('median_us'), 1)} µs (record's ncu {fmt(w.get('kernel_duration_us'), 1)})"


def markdown(result: dict[str, Any]) -> str:
    """The verdict table, the readings table, then per definition what each side said."""
    mode = result.get("gpuarena_mode", "ranked")
    lines = [
        f"# FlashInfer-Bench's Benchmark beside gpuarena's {mode} verdict",
        "",
        f"Device: {result.get('device')}. {result.get('date', '')}. flashinfer-bench {result.get('flashinfer_bench') or '?'}. "
        f"Command: `{result.get('command')}`. Medians of {result.get('repeat')} runs; ncu: {result.get('ncu') or 'missing'}; "
        f"Triton cache: {result.get('triton_cache', '?')}.",
        "",
        "FlashInfer-Bench: one process per verdict (one definition, its solution, all its workloads), "
        "what `flashinfer-bench run --local` does with its defaults ("
        + ", ".join(f"{k}={v}" for k, v in FIB_SETTINGS.items())
        + f"); latency = its mean over trials of do_bench's mean. gpuarena: `gpuarena run --mode {mode}`, median device "
        "time and the record's own ncu figure per workload. ncu: gpu__time_duration.sum over one call's kernels, "
        "--cache-control all, median over calls.",
        "",
        "FlashInfer-Bench's own loader (TraceSet.from_path) on the trace-set: "
        + json.dumps(result.get("flashinfer_bench_load")),
        "",
        f"| definition | solution | FlashInfer-Bench wall s | its status | gpuarena {mode} wall s | status "
        "| wall gpuarena/FlashInfer-Bench |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in result.get("definitions", []):
        s = summarize(e)
        lines.append(
            f"| {e['name']} | {e.get('solution')} ({e.get('language')}) | {fmt(s['fib_wall_s'])} | {', '.join(map(str, s['fib_status']))} "
            f"| {fmt(s['ga_wall_s'])} | {', '.join(map(str, s['ga_status']))} | {fmt(s['wall_ga_over_fib'])} |"
        )
    lines += [
        "",
        "| definition | workload | FlashInfer-Bench status | its latency µs | its reference µs | gpuarena status | its median µs "
        "| record's ncu µs | ncu µs | FlashInfer-Bench/ncu | gpuarena/ncu | record/ncu |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for e in result.get("definitions", []):
        for w in summarize(e)["workloads"].values():
            lines.append(
                f"| {e['name']} | {_axes(w['axes'])} | {', '.join(map(str, w['fib_status']))} | {fmt(w['fib_latency_us'], 1)} "
                f"| {fmt(w['fib_reference_us'], 1)} | {', '.join(map(str, w['ga_status']))} | {fmt(w['ga_median_us'], 1)} "
                f"| {fmt(w['ga_kernel_duration_us'], 1)} | {fmt(w['ncu_us'], 1)} | {fmt(w['fib_over_ncu'], 3)} "
                f"| {fmt(w['ga_over_ncu'], 3)} | {fmt(w['ga_record_ncu_over_ncu'], 3)} |"
            )
    lines.append("")
    for e in result.get("definitions", []):
        lines.append(f"## {e['name']}")
        if e.get("error"):
            lines.append(f"- not run: {e['error']}")
        if e.get("import_wall_s") is not None:
            lines.append(
                f"- gpuarena import (definition, workloads, solution; checked on the CPU): {e['import_wall_s']} s"
                + (f"; FAILED: {e['import_error']}" if e.get("import_error") else "")
            )
        for r in e["flashinfer_bench"]:
            if r.get("error"):
                lines.append(f"- FlashInfer-Bench: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{stderr_note(r)}")
                continue
            lines.append(
                f"- FlashInfer-Bench: wall {r.get('wall_s')} s (import {r.get('import_s')} s, run_all {r.get('run_s')} s), "
                + "; ".join(
                    f"{t['workload'][:8]} {t['status']} {fmt(t.get('latency_us'), 1)} µs (reference {fmt(t.get('reference_latency_us'), 1)} µs, "
                    f"max abs err {t.get('max_absolute_error')})" + (f" log: {t['log'][-300:]}" if t.get("log") else "")
                    for t in r.get("traces", [])
                )
                + (
                    f"; no trace for {', '.join(u[:8] for u in r['untraced'])} (its runner gave up)"
                    if r.get("untraced")
                    else ""
                )
            )
        lines += [gpuarena_line(r, _workload) for r in e["gpuarena"]]
        lines += [ncu_line(f"ncu {key[:8]}", n) for key, n in (e.get("ncu") or {}).items()]
        if e.get("import"):
            lines += [
                "",
                "`gpuarena import flashinfer` and `flashinfer-solution`:",
                "",
                "```",
                e["import"].strip(),
                "```",
            ]
        lines.append("")
    return "\n".join(lines)


# -- the sides --------------------------------------------------------------------------------
def import_gpuarena(files: dict[str, Path], into: Path, timeout: float) -> dict[str, Any]:
    """`gpuarena import flashinfer` of the definition and its workloads, `gpuarena import
    flashinfer-solution` of the solution: {problem, solution} folders, or an error; the output."""
    problem, solution = into / "problem", into / "solution"
    definition = ["flashinfer", str(files["definition"]), "-w", str(files["workloads"]), "-o", str(problem)]
    sources = ["flashinfer-solution", str(files["solution"]), "--problem", str(problem), "-o", str(solution)]
    steps = [[sys.executable, "-m", "gpuarena", "import", *step, "--force"] for step in (definition, sources)]
    log, wall = [], 0.0
    for cmd in steps:
        done = run_process(cmd, timeout)
        wall += done["wall_s"]
        log.append(
            f"$ gpuarena import {shlex.join(cmd[4:])}\n{tail(done['stdout'], 1500)}\n{tail(done['stderr'], 1500)}".strip()
        )
        if done["rc"] != 0:
            why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}"
            return {"error": f"{cmd[4]} import: {why}", "log": "\n".join(log), "wall_s": round(wall, 3)}
    return {"problem": problem, "solution": solution, "log": "\n".join(log), "wall_s": round(wall, 3)}


def triton_cache(folder: Path | None) -> dict[str, str]:
    """TRITON_CACHE_DIR for a side's process: an empty folder of its own (both sides compile the
    solution as a new submission; the kernels' sources are the same, so a shared cache would let
    the second side find the first's builds), or the machine's (None)."""
    return {} if folder is None else {"TRITON_CACHE_DIR": str(folder)}


def gpuarena_env(device: str, cache: Path | None = None) -> dict[str, str]:
    """The environment of one `gpuarena run` process: its Triton cache, and on the CPU Triton's interpreter."""
    extra = triton_cache(cache)
    if device == "cpu":
        extra["TRITON_INTERPRET"] = "1"  # Triton on the CPU: its interpreter
    return child_env(**extra)


def run_flashinfer_bench(
    trace_set: Path, name: str, solution: str, scratch: Path, timeout: float, fresh_triton: bool = True
) -> dict[str, Any]:
    """One FlashInfer-Bench verdict: a fresh `--fib-child` process on a fresh copy of the trace-set."""
    if scratch.exists():
        shutil.rmtree(scratch)
    copy = scratch / "trace-set"
    shutil.copytree(trace_set, copy)
    cmd = [sys.executable, str(SCRIPT), "--fib-child", "--trace-set", str(copy), "--definition", name]
    cmd += ["--solution-name", solution]
    # its logs and builds in the scratch folder, not in ~/.cache/flashinfer_bench
    env = child_env(
        FIB_CACHE_PATH=str(scratch / "fib-cache"), **triton_cache(scratch / "triton" if fresh_triton else None)
    )
    done = run_process(cmd, timeout, cwd=scratch, env=env)
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    child = result_line(done["stdout"], RESULT_TAG)
    if child is None:
        return row | no_result(done, timeout, "no result line")
    row |= {k: child.get(k) for k in ("import_s", "run_s", "version", "traces", "error")}
    statuses = sorted({t["status"] for t in child.get("traces") or []})
    row["status"] = ",".join(statuses) if statuses else None
    traced = {t["workload"] for t in child.get("traces") or []}
    row["untraced"] = [w for w in child.get("workloads") or [] if w not in traced] or None  # its runner gave up on them
    if not child.get("traces") and not child.get("error"):
        row["error"] = "no trace: Benchmark.run_all evaluated nothing"
    if row.get("error") or statuses != ["PASSED"]:
        row["stderr"] = tail(done["stderr"])
    return {k: v for k, v in row.items() if v is not None}


def run_ncu(ncu: str, trace_set: Path, name: str, workload: str, calls: int, timeout: float) -> dict[str, Any]:
    """ncu's gpu__time_duration.sum over each call's kernels (NVTX range), median over calls;
    peer_common's ncu_reading, as bench/peer_kernelbench.py's run_ncu."""
    child = [sys.executable, str(SCRIPT), "--ncu-child", "--trace-set", str(trace_set), "--definition", name]
    child += ["--workload", workload, "--calls", str(calls)]
    return ncu_reading(ncu, NVTX_RANGE, child, calls, timeout)


# -- the children -----------------------------------------------------------------------------
def ncu_child(args: argparse.Namespace) -> None:
    """The process ncu profiles: the solution on one workload, CALLS calls in NVTX ranges."""
    import torch

    definition, workloads, solution = load_documents(args.trace_set, args.definition)
    workload = next(w["workload"] for w in workloads if w["workload"]["uuid"] == args.workload)
    with tempfile.TemporaryDirectory(prefix="peer-fi-ncu-") as tmp:
        entry = load_entry(solution, Path(tmp))
        torch.manual_seed(0)
        arguments = draw_arguments(definition, workload, "cuda")
        with torch.no_grad():
            profile_calls(entry, arguments, args.calls, NVTX_RANGE)


# -- the parent -------------------------------------------------------------------------------
def parent(args: argparse.Namespace) -> int:
    import torch

    cpu = args.device == "cpu"
    if not cpu and not torch.cuda.is_available():
        print("peer_flashinfer: no CUDA device here; run this on the GPU machine (or --device cpu).", file=sys.stderr)
        return 2
    chosen = {n: problems()[n] for n in definition_names(args.definitions)}
    ncu = None if (cpu or args.no_ncu) else find_ncu()
    result: dict[str, Any] = {
        "device": "cpu" if cpu else torch.cuda.get_device_name(0),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python3 bench/peer_flashinfer.py " + shlex.join(sys.argv[1:]),
        "flashinfer_bench": fib_version(),
        "repeat": args.repeat,
        "gpuarena_mode": "test" if cpu else "ranked",
        "triton_cache": "the machine's, shared" if args.shared_triton_cache else "empty, each verdict its own",
        "settings": FIB_SETTINGS,
        "ncu": ncu,
        "definitions": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    catch_stop()

    def write() -> None:
        for e in result["definitions"]:
            e["summary"] = summarize(e)
        write_result(args.out, "peer-flashinfer", result, markdown(result))

    with tempfile.TemporaryDirectory(prefix="peer-fi-") as tmp:
        scratch = Path(tmp)
        trace_set = write_trace_set(scratch / "trace-set", chosen)
        if args.keep_trace_set:
            shutil.copytree(trace_set, args.out / "trace-set", dirs_exist_ok=True)
        result["flashinfer_bench_load"] = validate_with_flashinfer_bench(trace_set)
        print("FlashInfer-Bench's loader:", json.dumps(result["flashinfer_bench_load"]), flush=True)
        imported: dict[str, dict[str, Any]] = {}
        for name, p in chosen.items():
            entry: dict[str, Any] = {
                "name": name,
                "solution": p["solution"]["name"],
                "language": p["solution"]["spec"]["language"],
                "workloads": [{"uuid": w["workload"]["uuid"], "axes": w["workload"]["axes"]} for w in p["workloads"]],
                "flashinfer_bench": [],
                "gpuarena": [],
                "ncu": {},
            }
            imported[name] = import_gpuarena(paths_of(trace_set, p), scratch / "imported" / name, args.timeout)
            entry["import"] = imported[name]["log"]
            entry["import_wall_s"] = imported[name]["wall_s"]
            if imported[name].get("error"):
                entry["import_error"] = imported[name]["error"]
            print(f"{name} imported in {imported[name]['wall_s']} s", imported[name].get("error", ""), flush=True)
            result["definitions"].append(entry)
        write()
        for rep in range(args.repeat):
            for e in result["definitions"]:
                name, got = e["name"], imported[e["name"]]
                if not cpu:
                    fib = run_flashinfer_bench(
                        trace_set,
                        name,
                        e["solution"],
                        scratch / "fib" / name,
                        args.timeout,
                        not args.shared_triton_cache,
                    )
                    e["flashinfer_bench"].append(fib)
                    print(
                        f"[{rep + 1}/{args.repeat}] {name} FlashInfer-Bench {fib['wall_s']} s", _brief(fib), flush=True
                    )
                if got.get("error"):
                    ga: dict[str, Any] = {"wall_s": None, "error": f"not imported: {got['error']}"}
                else:
                    cache = None if args.shared_triton_cache else scratch / "ga-triton" / f"{name}-{rep}"
                    env = gpuarena_env(args.device, cache)
                    ga = run_gpuarena(
                        got["problem"], got["solution"], result["gpuarena_mode"], args.device, args.timeout, env
                    )
                e["gpuarena"].append(ga)
                print(f"[{rep + 1}/{args.repeat}] {name} gpuarena {ga['wall_s']} s", _brief(ga), flush=True)
                if ncu and rep == 0:
                    for w in e["workloads"]:
                        n = run_ncu(ncu, trace_set, name, w["uuid"], args.ncu_calls, args.timeout)
                        e["ncu"][w["uuid"]] = n
                        print(f"{name} {_axes(w['axes'])} ncu", n.get("us"), n.get("error", "")[:300], flush=True)
                write()
    write()
    print_report(markdown(result))  # the tables last: validate.sh keeps the log's tail
    return 0


def _brief(row: dict[str, Any]) -> str:
    if row.get("error"):
        return f"ERROR {row['error'][:200]} {row.get('stderr', '')[-400:]}"
    if "traces" in row:
        return "; ".join(f"{t['status']} {t.get('latency_us')} µs" for t in row["traces"])
    return f"{row.get('status')} " + ", ".join(
        f"{w['status']} {w.get('median_us')} µs (ncu-in-record {w.get('kernel_duration_us')})"
        for w in row.get("workloads", [])
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--definitions", help=f"comma-separated definitions (default: all of {', '.join(problems())})")
    p.add_argument("--repeat", type=int, default=2, help="verdicts of each side per definition (default 2)")
    p.add_argument("--out", type=Path, help="folder for peer-flashinfer.json and .md")
    p.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu: the check without a GPU (the trace-set loaded by FlashInfer-Bench's models where it is "
        "installed, imported by gpuarena, the solution through `gpuarena run --mode test` on the CPU "
        "workload the importer adds, Triton interpreted); FlashInfer-Bench's run and ncu need CUDA",
    )
    p.add_argument("--timeout", type=float, default=300, help="limit of one verdict, in seconds (default 300)")
    p.add_argument("--ncu-calls", type=int, default=5, help="calls profiled by ncu per workload (default 5)")
    p.add_argument("--no-ncu", action="store_true", help="leave ncu out")
    p.add_argument(
        "--shared-triton-cache",
        action="store_true",
        help="both sides use the machine's Triton cache (default: an empty one each verdict, a new submission's builds)",
    )
    p.add_argument("--keep-trace-set", action="store_true", help="copy the trace-set written into OUT/trace-set")
    p.add_argument("--fib-child", action="store_true", help="(child) one FlashInfer-Bench verdict")
    p.add_argument("--ncu-child", action="store_true", help="(child) the process ncu profiles")
    p.add_argument("--trace-set", type=Path, help="(child) the trace-set folder")
    p.add_argument("--definition", help="(child) the definition's name")
    p.add_argument("--solution-name", help="(FlashInfer-Bench child) the solution's name")
    p.add_argument("--workload", help="(ncu child) the workload's uuid")
    p.add_argument("--calls", type=int, default=5, help="(ncu child) calls in NVTX ranges")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ncu_child:
        ncu_child(args)
        return 0
    if args.fib_child:
        print(RESULT_TAG + json.dumps(fib_child(args), default=str), flush=True)
        return 0
    if args.out is None:
        parser.error("--out is required")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
