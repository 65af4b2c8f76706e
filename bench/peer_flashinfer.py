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
its reading (fidelity.py's parser and grouping): gpu__time_duration.sum over one call's kernels,
median over calls. Each method's reading is divided by it.

Every side runs with a time limit in its own process group (peer_kernelbench's run_process); a
side that fails, hangs or prints no result is recorded with its stderr's tail, and the bench goes
on. DIR/peer-flashinfer.json and DIR/peer-flashinfer.md are rewritten after every verdict."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
BENCH = SCRIPT.parent
sys.path.insert(0, str(BENCH))
from peer_kernelbench import (  # noqa: E402
    NCU_METRIC,
    _f,
    _stderr,
    _stop,
    child_env,
    find_ncu,
    group_calls,
    median_of,
    parse_ncu_csv,
    ratio,
    record_figures,
    run_process,
    tail,
)

RESULT_TAG = "PEER_FI_RESULT="
NVTX_RANGE = "peer_fi_call"
# flashinfer-bench's CLI defaults (`flashinfer-bench run`), which its BenchmarkConfig shares
FIB_SETTINGS: dict[str, Any] = {
    "warmup_runs": 10,
    "iterations": 50,
    "num_trials": 3,
    "rtol": 1e-2,
    "atol": 1e-2,
    "use_isolated_runner": False,
    "timeout_seconds": 300,
}
AUTHOR = "gpuarena-bench"
DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "int32": "int32", "int64": "int64"}

# -- the problems: FlashInfer-Trace documents written for this bench ---------------------------
RMSNORM_REFERENCE = """import torch


def run(hidden_states, weight, eps):
    # each row divided by its root mean square (taken in float32), times the weight
    x = hidden_states.float()
    scale = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)
    return (x * scale * weight.float()).to(hidden_states.dtype)
"""

RMSNORM_TRITON = '''import triton
import triton.language as tl


@triton.jit
def _rms_rows(src, gain, dst, width, eps, src_row, dst_row, WIDTH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, WIDTH)
    inside = cols < width
    x = tl.load(src + row * src_row + cols, mask=inside, other=0.0).to(tl.float32)
    g = tl.load(gain + cols, mask=inside, other=0.0).to(tl.float32)
    scale = tl.rsqrt(tl.sum(x * x, axis=0) / width + eps)
    tl.store(dst + row * dst_row + cols, (x * scale * g).to(dst.dtype.element_ty), mask=inside)


def run(hidden_states, weight, eps, output):
    """One program a row, the whole row in registers; output given (destination passing)."""
    rows, width = hidden_states.shape
    x = hidden_states.contiguous()
    block = triton.next_power_of_2(width)
    _rms_rows[(rows,)](x, weight, output, width, eps, x.stride(0), output.stride(0), WIDTH=block,
                       num_warps=8 if block >= 4096 else 4)
'''

SILU_MUL_REFERENCE = """import torch
import torch.nn.functional as F


def run(gate, up):
    # the gated MLP's activation: silu(gate) * up, computed in float32
    return (F.silu(gate.float()) * up.float()).to(gate.dtype)
"""

SILU_MUL_TRITON = '''import triton
import triton.language as tl


@triton.jit
def _gated(gate, up, dst, count, BLOCK: tl.constexpr):
    index = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = index < count
    g = tl.load(gate + index, mask=inside, other=0.0).to(tl.float32)
    u = tl.load(up + index, mask=inside, other=0.0).to(tl.float32)
    tl.store(dst + index, (g * tl.sigmoid(g) * u).to(dst.dtype.element_ty), mask=inside)


def run(gate, up, output):
    """Elementwise over the flattened tensors; output given (destination passing)."""
    gate, up = gate.contiguous(), up.contiguous()
    count = gate.numel()
    block = 2048
    _gated[(triton.cdiv(count, block),)](gate, up, output, count, BLOCK=block)
'''

GEMM_REFERENCE = """import torch


def run(activations, weight):
    # a linear layer without bias: activations times the transposed weight
    return torch.matmul(activations, weight.t())
"""

GEMM_TORCH = '''import torch


def run(activations, weight, output):
    """cuBLAS through torch.matmul, written into the given output (destination passing)."""
    torch.matmul(activations, weight.t(), out=output)
'''


def _workload(definition: str, axes: dict[str, int], inputs: dict[str, Any]) -> dict[str, Any]:
    """A workload trace (no solution, no evaluation); its uuid fixed by its content."""
    key = json.dumps([definition, axes, inputs], sort_keys=True)
    return {
        "definition": definition,
        "workload": {
            "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, "gpuarena-peer-fi:" + key)),
            "axes": axes,
            "inputs": inputs,
        },
        "solution": None,
        "evaluation": None,
    }


def _solution(name: str, definition: str, language: str, source: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "definition": definition,
        "author": AUTHOR,
        "description": description,
        "spec": {
            "language": language,
            "target_hardware": ["NVIDIA_H200"],
            "entry_point": "main.py::run",
            "dependencies": ["triton >= 3.0"] if language == "triton" else [],
            "destination_passing_style": True,
        },
        # one file: FlashInfer-Bench imports the sources as a package, gpuarena from their folder
        "sources": [{"path": "main.py", "content": source}],
    }


def problems() -> dict[str, dict[str, Any]]:
    """Definition name -> {definition, workloads, solution}, FlashInfer-Trace documents as dicts."""
    random = {"type": "random"}
    rms = "rms_norm_bf16_h4096"
    silu = "silu_and_mul_bf16_i14336"
    gemm = "gemm_bf16_n1024_k4096"
    tokens = {"type": "var", "description": "Tokens in the batch."}
    return {
        rms: {
            "definition": {
                "name": rms,
                "op_type": "rmsnorm",
                "description": "Root-mean-square normalisation of each token's 4096 bf16 activations, times a gain.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "num_tokens": tokens,
                    "hidden": {"type": "const", "value": 4096, "description": "Model width."},
                },
                "inputs": {
                    "hidden_states": {"shape": ["num_tokens", "hidden"], "dtype": "bfloat16"},
                    "weight": {"shape": ["hidden"], "dtype": "bfloat16", "description": "Per-channel gain."},
                    "eps": {"shape": None, "dtype": "float32", "description": "Added under the root."},
                },
                "outputs": {"output": {"shape": ["num_tokens", "hidden"], "dtype": "bfloat16"}},
                "reference": RMSNORM_REFERENCE,
            },
            "workloads": [
                _workload(
                    rms,
                    {"num_tokens": n},
                    {"hidden_states": random, "weight": random, "eps": {"type": "scalar", "value": 1e-5}},
                )
                for n in (4096, 128)
            ],
            "solution": _solution(rms + "_triton", rms, "triton", RMSNORM_TRITON, "One Triton program a row."),
        },
        silu: {
            "definition": {
                "name": silu,
                "op_type": "activation",
                "description": "The gated MLP's activation, silu(gate) * up, at an intermediate size of 14336 in bf16.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "num_tokens": tokens,
                    "intermediate": {"type": "const", "value": 14336, "description": "MLP width."},
                },
                "inputs": {
                    "gate": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"},
                    "up": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"},
                },
                "outputs": {"output": {"shape": ["num_tokens", "intermediate"], "dtype": "bfloat16"}},
                "reference": SILU_MUL_REFERENCE,
            },
            "workloads": [_workload(silu, {"num_tokens": 4096}, {"gate": random, "up": random})],
            "solution": _solution(silu + "_triton", silu, "triton", SILU_MUL_TRITON, "Elementwise Triton kernel."),
        },
        gemm: {
            "definition": {
                "name": gemm,
                "op_type": "gemm",
                "description": "A bias-free linear layer in bf16, a K/V projection's shape: (M x 4096) times the transpose of a 1024 x 4096 weight.",
                "tags": ["model:llama-3-8b", "bench:gpuarena-peer"],
                "axes": {
                    "M": tokens,
                    "N": {"type": "const", "value": 1024, "description": "Output features."},
                    "K": {"type": "const", "value": 4096, "description": "Input features."},
                },
                "inputs": {
                    "activations": {"shape": ["M", "K"], "dtype": "bfloat16"},
                    "weight": {"shape": ["N", "K"], "dtype": "bfloat16"},
                },
                "outputs": {"output": {"shape": ["M", "N"], "dtype": "bfloat16"}},
                "reference": GEMM_REFERENCE,
            },
            "workloads": [_workload(gemm, {"M": 4096}, {"activations": random, "weight": random})],
            "solution": _solution(gemm + "_torch", gemm, "python", GEMM_TORCH, "Plain PyTorch: torch.matmul."),
        },
    }


def write_trace_set(root: Path, chosen: dict[str, dict[str, Any]]) -> Path:
    """ROOT as a FlashInfer-Trace trace-set: definitions/OP/NAME.json, solutions/AUTHOR/OP/NAME/SOL.json,
    workloads/OP/NAME.jsonl (the layout TraceSet.from_path reads and its CLI's export writes)."""
    for name, p in chosen.items():
        op = p["definition"]["op_type"]
        files = {
            root / "definitions" / op / f"{name}.json": json.dumps(p["definition"], indent=2) + "\n",
            root / "solutions" / AUTHOR / op / name / f"{p['solution']['name']}.json": json.dumps(
                p["solution"], indent=2
            )
            + "\n",
            root / "workloads" / op / f"{name}.jsonl": "".join(json.dumps(w) + "\n" for w in p["workloads"]),
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return root


def paths_of(root: Path, p: dict[str, Any]) -> dict[str, Path]:
    name, op = p["definition"]["name"], p["definition"]["op_type"]
    return {
        "definition": root / "definitions" / op / f"{name}.json",
        "workloads": root / "workloads" / op / f"{name}.jsonl",
        "solution": root / "solutions" / AUTHOR / op / name / f"{p['solution']['name']}.json",
    }


def definition_names(text: str | None) -> list[str]:
    known = list(problems())
    if not text:
        return known
    names = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown definitions {unknown}; known: {known}")
    return names


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
            f"| {e['name']} | {e.get('solution')} ({e.get('language')}) | {_f(s['fib_wall_s'])} | {', '.join(map(str, s['fib_status']))} "
            f"| {_f(s['ga_wall_s'])} | {', '.join(map(str, s['ga_status']))} | {_f(s['wall_ga_over_fib'])} |"
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
                f"| {e['name']} | {_axes(w['axes'])} | {', '.join(map(str, w['fib_status']))} | {_f(w['fib_latency_us'], 1)} "
                f"| {_f(w['fib_reference_us'], 1)} | {', '.join(map(str, w['ga_status']))} | {_f(w['ga_median_us'], 1)} "
                f"| {_f(w['ga_kernel_duration_us'], 1)} | {_f(w['ncu_us'], 1)} | {_f(w['fib_over_ncu'], 3)} "
                f"| {_f(w['ga_over_ncu'], 3)} | {_f(w['ga_record_ncu_over_ncu'], 3)} |"
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
                lines.append(f"- FlashInfer-Bench: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{_stderr(r)}")
                continue
            lines.append(
                f"- FlashInfer-Bench: wall {r.get('wall_s')} s (import {r.get('import_s')} s, run_all {r.get('run_s')} s), "
                + "; ".join(
                    f"{t['workload'][:8]} {t['status']} {_f(t.get('latency_us'), 1)} µs (reference {_f(t.get('reference_latency_us'), 1)} µs, "
                    f"max abs err {t.get('max_absolute_error')})" + (f" log: {t['log'][-300:]}" if t.get("log") else "")
                    for t in r.get("traces", [])
                )
                + (
                    f"; no trace for {', '.join(u[:8] for u in r['untraced'])} (its runner gave up)"
                    if r.get("untraced")
                    else ""
                )
            )
        for r in e["gpuarena"]:
            if r.get("error"):
                lines.append(f"- gpuarena: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{_stderr(r)}")
                continue
            lines.append(
                f"- gpuarena: wall {r.get('wall_s')} s (record {r.get('duration_s')} s), {r.get('status')}"
                + (f" {r.get('reason', '')[:200]}" if r.get("status") != "PASSED" else "")
                + f"; phases {json.dumps(r.get('phases'))}; workloads "
                + ", ".join(
                    f"{w['name'][:8]} {w['status']} {_f(w.get('median_us'), 1)} µs (record's ncu {_f(w.get('kernel_duration_us'), 1)})"
                    for w in r.get("workloads", [])
                )
            )
        for key, n in (e.get("ncu") or {}).items():
            lines.append(
                f"- ncu {key[:8]}: {_f(n.get('us'), 1)} µs, {n.get('kernels_per_call')} kernel(s) a call {n.get('kernels')}"
                + (f"; ERROR {n['error'][:300]}{_stderr(n)}" if n.get("error") else "")
            )
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


def child_result(stdout: str) -> dict[str, Any] | None:
    """The child's last RESULT_TAG line (FlashInfer-Bench logs its own lines around it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            try:
                return json.loads(line[len(RESULT_TAG) :])
            except json.JSONDecodeError:
                return None
    return None


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


def run_gpuarena(
    problem: Path, solution: Path, device: str, mode: str, timeout: float, cache: Path | None = None
) -> dict[str, Any]:
    """One `gpuarena run` process, timed from outside; the record's figures per workload."""
    cmd = [sys.executable, "-m", "gpuarena", "run", str(problem), str(solution)]
    cmd += ["--mode", mode, "--device", device, "--json"]
    extra = triton_cache(cache)
    if device == "cpu":
        extra["TRITON_INTERPRET"] = "1"  # Triton on the CPU: its interpreter
    done = run_process(cmd, timeout, env=child_env(**extra))
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    try:
        record = json.loads(done["stdout"])
    except json.JSONDecodeError:
        why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}, no JSON record"
        return row | {"error": why, "stderr": tail(done["stderr"], 3000), "stdout": tail(done["stdout"], 1000)}
    return row | record_figures(record)


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
    child = child_result(done["stdout"])
    if child is None:
        why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}, no result line"
        return row | {"error": why, "stderr": tail(done["stderr"]), "stdout": tail(done["stdout"], 1000)}
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
    the flags and the reading of bench/peer_kernelbench.py's run_ncu."""
    cmd = [ncu, "--metrics", NCU_METRIC, "--clock-control", "none", "--cache-control", "all", "--csv"]
    cmd += ["--target-processes", "all", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"]
    cmd += [sys.executable, str(SCRIPT), "--ncu-child", "--trace-set", str(trace_set), "--definition", name]
    cmd += ["--workload", workload, "--calls", str(calls)]
    done = run_process(cmd, timeout, env=child_env(LC_ALL="C"))
    record: dict[str, Any] = {"command": shlex.join(cmd), "wall_s": done["wall_s"]}
    if done["timed_out"]:
        return record | {"error": f"timed out after {timeout:.0f} s", "stderr": tail(done["stderr"])}
    text = done["stdout"] + "\n" + done["stderr"]
    try:
        rows = parse_ncu_csv(text)
        if not rows:
            return record | {"error": f"ncu gave no {NCU_METRIC} rows (exit {done['rc']}): {tail(text)}"}
        calls_ns, per_call = group_calls(rows, calls)
    except ValueError as exc:
        return record | {"error": str(exc), "stderr": tail(text)}
    return record | {
        "us": statistics.median(calls_ns) / 1e3,
        "calls_ns": calls_ns,
        "kernels_per_call": per_call,
        "kernels": [r.name[:80] for r in rows[:per_call]],
    }


# -- the children -----------------------------------------------------------------------------
def fib_version() -> str | None:
    try:
        return importlib.metadata.version("flashinfer-bench")
    except importlib.metadata.PackageNotFoundError:
        return None


def fib_child(args: argparse.Namespace) -> dict[str, Any]:
    """One FlashInfer-Bench verdict, as its CLI's `run --local DIR --definitions D --solutions S` runs it."""
    started = time.perf_counter()
    out: dict[str, Any] = {"version": fib_version(), "traces": []}
    from flashinfer_bench.bench import Benchmark, BenchmarkConfig
    from flashinfer_bench.data import TraceSet

    out["import_s"] = round(time.perf_counter() - started, 3)
    # its CLI's logging (cli_config_logging): the package's INFO lines, here on stderr
    package_log = logging.getLogger("flashinfer_bench")
    package_log.setLevel(logging.INFO)
    package_log.addHandler(logging.StreamHandler())
    t0 = time.perf_counter()
    benchmark, ran = None, None
    try:
        trace_set = TraceSet.from_path(str(args.trace_set))
        out["workloads"] = [t.workload.uuid for t in trace_set.workloads.get(args.definition, [])]
        config = BenchmarkConfig(**FIB_SETTINGS, definitions=[args.definition], solutions=[args.solution_name])
        benchmark = Benchmark(trace_set, config)  # its runner starts here (no CUDA device: it raises)
        ran = benchmark.run_all(True)
    except Exception as exc:  # the CLI logs and re-raises: here it is the verdict's error
        out["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if benchmark is not None:
            benchmark.close()
    out["run_s"] = round(time.perf_counter() - t0, 3)
    for trace in ran.traces.get(args.definition, []) if ran is not None else []:
        ev = trace.evaluation
        perf, corr = ev.performance, ev.correctness
        out["traces"].append(
            {
                "workload": trace.workload.uuid,
                "solution": trace.solution,
                "status": ev.status.value,
                "latency_us": perf.latency_ms * 1e3 if perf else None,
                "reference_latency_us": perf.reference_latency_ms * 1e3 if perf else None,
                "speedup": perf.speedup_factor if perf else None,
                "max_absolute_error": corr.max_absolute_error if corr else None,
                "max_relative_error": corr.max_relative_error if corr else None,
                "hardware": ev.environment.hardware,
                "log": (ev.log or "")[-1500:] if ev.status.value != "PASSED" else "",
            }
        )
    return out


def load_documents(trace_set: Path, name: str) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """The definition, its workload traces and its (first) solution, as JSON, from the folder."""
    definition = json.loads(next((trace_set / "definitions").rglob(f"{name}.json")).read_text())
    lines = next((trace_set / "workloads").rglob(f"{name}.jsonl")).read_text().splitlines()
    workloads = [json.loads(line) for line in lines if line.strip()]
    solution = json.loads(next((trace_set / "solutions").rglob(f"*/{name}/*.json")).read_text())
    return definition, workloads, solution


def draw_arguments(definition: dict[str, Any], workload: dict[str, Any], device: str) -> list[Any]:
    """Inputs (as FlashInfer-Bench draws random ones: randn for floats) then empty outputs, in the
    definition's order: a destination-passing solution's arguments."""
    import torch

    sizes = {a: spec["value"] for a, spec in definition["axes"].items() if spec["type"] == "const"}
    sizes |= workload["axes"]
    args: list[Any] = []
    for name, spec in definition["inputs"].items():
        given = workload["inputs"].get(name, {})
        dtype = getattr(torch, DTYPES[spec["dtype"]])
        if given.get("type") == "scalar":
            args.append(given["value"])
        elif dtype.is_floating_point:
            args.append(torch.randn([sizes[a] for a in spec["shape"] or []], dtype=dtype, device=device))
        else:
            args.append(torch.randint(-1024, 1024, [sizes[a] for a in spec["shape"] or []], dtype=dtype, device=device))
    for spec in definition["outputs"].values():
        args.append(
            torch.empty([sizes[a] for a in spec["shape"]], dtype=getattr(torch, DTYPES[spec["dtype"]]), device=device)
        )
    return args


def load_entry(solution: dict[str, Any], into: Path) -> Any:
    """The solution's entry function, its sources written into INTO and imported from there."""
    for source in solution["sources"]:
        path = into / source["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source["content"])
    file, symbol = solution["spec"]["entry_point"].split("::")
    sys.path.insert(0, str(into))  # its other files, imported by their names
    spec = importlib.util.spec_from_file_location(f"peer_fi_solution_{abs(hash(str(into)))}", into / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, symbol)


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
            for _ in range(3):  # builds and autotuning, outside the ranges
                entry(*arguments)
            torch.cuda.synchronize()
            for _ in range(args.calls):
                torch.cuda.nvtx.range_push(NVTX_RANGE)
                entry(*arguments)
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()


def validate_with_flashinfer_bench(trace_set: Path) -> dict[str, Any]:
    """FlashInfer-Bench's own loader on the folder (its pydantic models): what it read, or why not."""
    try:
        from flashinfer_bench.data import TraceSet
    except Exception as exc:  # not installed, or its imports missing
        return {"error": f"flashinfer_bench not importable: {type(exc).__name__}: {exc}"}
    try:
        loaded = TraceSet.from_path(str(trace_set))
    except Exception as exc:
        return {"error": f"TraceSet.from_path refused it: {type(exc).__name__}: {exc}"}
    return {
        "version": fib_version(),
        "definitions": sorted(loaded.definitions),
        "solutions": {k: [s.name for s in v] for k, v in loaded.solutions.items()},
        "workloads": {k: len(v) for k, v in loaded.workloads.items()},
    }


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
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def write() -> None:
        for e in result["definitions"]:
            e["summary"] = summarize(e)
        (args.out / "peer-flashinfer.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        (args.out / "peer-flashinfer.md").write_text(markdown(result))

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
                    ga = run_gpuarena(
                        got["problem"], got["solution"], args.device, result["gpuarena_mode"], args.timeout, cache
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
    md = markdown(result)
    table = [line for line in md.splitlines() if line.startswith("|")]
    print(md + "\n" + "\n".join(table), flush=True)  # the tables last: validate.sh keeps the log's tail
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
