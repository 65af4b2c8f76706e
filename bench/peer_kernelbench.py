"""A whole verdict, gpuarena's beside KernelBench's own, on the same KernelBench problems and the
same ModelNew files, each method's time read against ncu's (issue 47: the peers' evaluations
side by side in one run on the GPU).

KernelBench's code is not in this repository: pass a copy of github.com/ScalingIntelligence/KernelBench
holding its src/kernelbench and KernelBench/levelN folders (`bench/gpu/carry.sh` copies one into
.gpu/kernelbench when KERNELBENCH_REPO names a local clone or bare git directory):

    python3 bench/peer_kernelbench.py --kernelbench .gpu/kernelbench --repeat 2 --out DIR \\
        [--problems level1/19_ReLU,level1/23_Softmax] [--solution level1/2_X=FILE[:BACKEND]]

KernelBench's side: its own `kernelbench.eval.eval_kernel_against_ref`, called the way its
scripts/run_and_check.py calls it when run locally (that script itself needs pydra and modal):
the static checker first (`validate_kernel_static`, recorded; run_and_check.py stops on its
errors, this bench goes on, as the eval itself does not run it), `set_gpu_arch` from the GPU's
compute capability, then the eval with run_and_check.py's defaults (5 correctness trials, 100
timed trials with CUDA events after its L2 thrash, fp32, build_dir test_build/hash(src) in the
child's folder, the excessive-speed-up check on, so the reference is timed too). One verdict is
one fresh Python process (`--kb-child`), timed from outside (wall time); its reported
`runtime` is the mean of the timed trials in milliseconds (timing.get_timing_stats), shown here
in µs. run_and_check.py's extra reference timings (eager and torch.compile) are not part of a
verdict and are left out.

KernelBench's package imports, at its top level, modules its eval never calls:
kernelbench/__init__ imports kernelbench.utils, which imports openai and litellm (LLM clients
for query_server), dotenv (load_dotenv() of a .env file of API keys) and tqdm (progress bars of
its multithreading helpers); eval.py imports requests and never uses it. The light ones travel
as wheels (carry.sh: requests, python-dotenv; tqdm is already there); each of these five that
is still missing where the bench runs is replaced by an empty stand-in module before the import
(a call into one raises), and the output says which were (`stubbed`). Everything the eval does
use (torch, numpy, pydantic, triton for Triton solutions) is the real package: a missing one
fails KernelBench's side, recorded with its stderr.

gpuarena's side: `gpuarena import kernelbench` of the same problem files (--keep-failing:
19_ReLU's inputs are non-negative, so `gpuarena check` finds that returning x passes, and the
import would leave it out), then the same ModelNew file, unmodified, through `gpuarena run
--mode ranked --device cuda --json` (every workload of the problem: the file's own sizes and
cpu-small), timed from outside; the record's status, phases, and for the `kernelbench`
workload (the file's sizes, what KernelBench runs) the median device time and the record's own
ncu figure (time.kernel_duration_us, CUPTI's Range Profiler: ranked mode reads it on one
workload).

ncu: where ncu is found (bench/fidelity.py's find_ncu), once per problem, `--ncu-child` builds
the same ModelNew at the file's sizes (inputs drawn on the GPU) and calls it inside an NVTX
range, under `ncu --metrics gpu__time_duration.sum --cache-control all --clock-control none`
(fidelity.py's settings; its parser and grouping are imported, not copied): the sum over one
call's kernels, median over calls. Each method's reading is divided by it.

Every side runs with a time limit in its own process group; a side that fails, hangs or prints
no result is recorded with its stderr's tail, and the bench goes on. DIR/peer-kernelbench.json
and DIR/peer-kernelbench.md are rewritten after every verdict, so a run cut short keeps what it
measured."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
import types
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
BENCH = SCRIPT.parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from fidelity import NCU_METRIC, child_env, find_ncu, group_calls, parse_ncu_csv  # noqa: E402

DEFAULT_PROBLEMS = (
    "level1/1_Square_matrix_multiplication_",
    "level1/23_Softmax",
    "level1/19_ReLU",
    "level2/12_Gemm_Multiply_LeakyReLU",
)
RESULT_TAG = "PEER_KB_RESULT="
NVTX_RANGE = "peer_kb_call"
SEED = 42  # KernelBench's eval seeds torch with 42 before the inputs and before each model
# scripts/run_and_check.py's defaults (ScriptConfig) for a local eval
KB_SETTINGS: dict[str, Any] = {
    "num_correct_trials": 5,
    "num_perf_trials": 100,
    "measure_performance": True,
    "timing_method": "cuda_event",
    "precision": "fp32",
    "verbose": False,
}
UNCALLED = {
    "openai": "kernelbench.utils imports OpenAI for query_server (LLM inference)",
    "litellm": "kernelbench.utils imports completion for query_server (LLM inference)",
    "dotenv": "kernelbench.utils calls load_dotenv() at import (API keys from a .env file)",
    "tqdm": "kernelbench.utils' progress bars (maybe_multithread, maybe_multiprocess_cuda)",
    "requests": "kernelbench.eval imports it and never uses it",
}
"""Top-level imports of KernelBench's package that eval_kernel_against_ref never calls: the
only ones this bench may replace by an empty module where they are not installed."""
ARCH_BY_CAPABILITY = {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}

# -- the ModelNew files: our own, written for this bench (never KernelBench's) ----------------
MATMUL_TORCH = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """C = A B for two square float32 matrices, one cuBLAS call."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.mm(A, B)
'''

SOFTMAX_TORCH = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Each row of x scaled to sum to one: exp(x - max) / sum, PyTorch's fused kernel."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.softmax(dim=1)
'''

RELU_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _clamp_below_zero(src, dst, count, BLOCK: tl.constexpr):
    start = tl.program_id(0).to(tl.int64) * BLOCK
    index = start + tl.arange(0, BLOCK)
    inside = index < count
    value = tl.load(src + index, mask=inside)
    # a NaN stays NaN, as in torch.relu
    tl.store(dst + index, tl.where(value < 0, 0.0, value), mask=inside)


class ModelNew(nn.Module):
    """max(x, 0) elementwise, one Triton kernel over the flattened tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        count = x.numel()
        block = 4096
        _clamp_below_zero[(triton.cdiv(count, block),)](x, out, count, BLOCK=block)
        return out
'''

GEMM_LEAKY_TORCH = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    """y = leaky_relu((x W^T + b) * multiplier): the bias folded into the GEMM (addmm), the
    scale and the leaky ReLU in one elementwise kernel. Its parameters are an nn.Linear's, made
    in the same order as the reference's, so the same seed gives the same weights."""

    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = torch.addmm(self.gemm.bias, x, self.gemm.weight.t())
        return F.leaky_relu(y * self.multiplier, self.negative_slope)
'''

SOLUTIONS: dict[str, tuple[str, str]] = {
    "level1/1_Square_matrix_multiplication_": ("cuda", MATMUL_TORCH),
    "level1/23_Softmax": ("cuda", SOFTMAX_TORCH),
    "level1/19_ReLU": ("triton", RELU_TRITON),
    "level2/12_Gemm_Multiply_LeakyReLU": ("cuda", GEMM_LEAKY_TORCH),
}
"""Problem -> (KernelBench backend, ModelNew source). `cuda` is KernelBench's default backend,
which exec()s the file (a plain PyTorch ModelNew runs there; its static checker then reports a
missing __global__ kernel, recorded); `triton` imports it from a file, as Triton needs."""


# -- pure helpers (tested on the CPU) ---------------------------------------------------------
def problem_names(text: str | None) -> list[str]:
    """`level1/19_ReLU,level2/x.py` -> names without .py, in order, duplicates dropped."""
    if not text:
        return list(DEFAULT_PROBLEMS)
    names = [n.strip().removesuffix(".py") for n in text.split(",") if n.strip()]
    return list(dict.fromkeys(names))


def parse_solution(spec: str) -> tuple[str, Path, str]:
    """`level1/2_X=FILE[:BACKEND]` (BACKEND: KernelBench's, default cuda)."""
    name, sep, rest = spec.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"--solution wants PROBLEM=FILE[:BACKEND], got {spec!r}")
    path, _, backend = rest.partition(":")
    return name.strip().removesuffix(".py"), Path(path), backend or "cuda"


def slug(name: str) -> str:
    return name.replace("/", "-")


def tail(text: str | bytes | None, n: int = 2000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-n:].strip()


def gpu_arch(capability: tuple[int, int]) -> str | None:
    """KernelBench's architecture name (utils.NVIDIA_ARCHS) for a compute capability."""
    major, minor = capability
    if (major, minor) == (7, 5):
        return "Turing"
    if (major, minor) == (8, 9):
        return "Ada"
    return ARCH_BY_CAPABILITY.get(major)


def result_line(stdout: str) -> dict[str, Any] | None:
    """The child's last RESULT_TAG line (KernelBench's eval prints its own lines around it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            try:
                return json.loads(line[len(RESULT_TAG) :])
            except json.JSONDecodeError:
                return None
    return None


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def summarize(problem: dict[str, Any]) -> dict[str, Any]:
    """Medians over repetitions and each method's reading over ncu's, for one problem."""
    kb, ga, ncu = problem["kernelbench"], problem["gpuarena"], problem.get("ncu") or {}
    ncu_us = ncu.get("us")
    s = {
        "kb_wall_s": median_of(kb, "wall_s"),
        "kb_runtime_us": median_of(kb, "runtime_us"),
        "kb_correct": [r.get("correctness") for r in kb],
        "ga_wall_s": median_of(ga, "wall_s"),
        "ga_median_us": median_of(ga, "median_us"),
        "ga_kernel_duration_us": median_of(ga, "kernel_duration_us"),
        "ga_status": [r.get("status") or r.get("error", "")[:60] for r in ga],
        "ncu_us": ncu_us,
    }
    s["kb_over_ncu"] = ratio(s["kb_runtime_us"], ncu_us)
    s["ga_over_ncu"] = ratio(s["ga_median_us"], ncu_us)
    s["ga_record_ncu_over_ncu"] = ratio(s["ga_kernel_duration_us"], ncu_us)
    s["wall_ga_over_kb"] = ratio(s["ga_wall_s"], s["kb_wall_s"])
    return s


def _stderr(row: dict[str, Any]) -> str:
    """The last lines of a failed side's stderr, on one line."""
    text = " / ".join(line.strip() for line in (row.get("stderr") or "").splitlines()[-4:] if line.strip())
    return f" (stderr: {text[-400:]})" if text else ""


def _f(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def markdown(result: dict[str, Any]) -> str:
    """The table, then per problem what each side said, then the errors."""
    lines = [
        "# KernelBench's eval_kernel_against_ref beside gpuarena's ranked verdict",
        "",
        f"Device: {result.get('device')}. {result.get('date', '')}. KernelBench {result.get('kernelbench_rev') or '?'}. "
        f"Command: `{result.get('command')}`. Medians of {result.get('repeat')} runs; ncu: {result.get('ncu') or 'missing'}.",
        "",
        "KernelBench: one process per verdict (its eval with scripts/run_and_check.py's settings: "
        + ", ".join(f"{k}={v}" for k, v in KB_SETTINGS.items())
        + "); runtime = its mean over the timed trials. gpuarena: `gpuarena run --mode ranked`, median device time "
        "and the record's own ncu figure on the `kernelbench` workload (the file's sizes). ncu: gpu__time_duration.sum "
        "over one call's kernels, --cache-control all, median over calls.",
        "",
        "| problem | backend | KernelBench wall s | correct | its runtime µs | gpuarena ranked wall s | status "
        "| its median µs | record's ncu µs | ncu µs | KernelBench/ncu | gpuarena/ncu | record/ncu | wall gpuarena/KernelBench |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in result.get("problems", []):
        s = summarize(p)
        lines.append(
            f"| {p['name']} | {p.get('backend')} | {_f(s['kb_wall_s'])} | {s['kb_correct']} | {_f(s['kb_runtime_us'], 1)} "
            f"| {_f(s['ga_wall_s'])} | {', '.join(map(str, s['ga_status']))} | {_f(s['ga_median_us'], 1)} "
            f"| {_f(s['ga_kernel_duration_us'], 1)} | {_f(s['ncu_us'], 1)} | {_f(s['kb_over_ncu'], 3)} "
            f"| {_f(s['ga_over_ncu'], 3)} | {_f(s['ga_record_ncu_over_ncu'], 3)} | {_f(s['wall_ga_over_kb'])} |"
        )
    stubbed = sorted({m for p in result.get("problems", []) for r in p["kernelbench"] for m in r.get("stubbed") or []})
    lines += [
        "",
        "KernelBench's top-level imports replaced by empty modules (never called by its eval): "
        + (", ".join(stubbed) if stubbed else "none")
        + ".",
        "",
    ]
    for p in result.get("problems", []):
        lines.append(f"## {p['name']}" + (f" ({p['solution']})" if p.get("solution") else ""))
        if p.get("error"):
            lines.append(f"- not run: {p['error']}")
        for r in p["kernelbench"]:
            if r.get("error") and r.get("correctness") is None:
                lines.append(f"- KernelBench: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{_stderr(r)}")
                continue
            static = r.get("static") or {}
            lines.append(
                f"- KernelBench: wall {r.get('wall_s')} s (import {r.get('import_s')} s, eval {r.get('eval_s')} s), "
                f"compiled {r.get('compiled')}, correct {r.get('correctness')}, runtime {_f(r.get('runtime_us'), 1)} µs "
                f"(stats in ms {json.dumps(r.get('runtime_stats'))}), reference {_f(r.get('ref_runtime_us'), 1)} µs; "
                f"static check valid {static.get('valid')}"
                + (f" (errors: {'; '.join(static.get('errors') or [])})" if static.get("errors") else "")
                + (f"; ERROR {r['error'][:300]}{_stderr(r)}" if r.get("error") else "")
            )
        for r in p["gpuarena"]:
            if r.get("error"):
                lines.append(f"- gpuarena: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{_stderr(r)}")
                continue
            lines.append(
                f"- gpuarena: wall {r.get('wall_s')} s (record {r.get('duration_s')} s), {r.get('status')}"
                + (f" {r.get('reason', '')[:200]}" if r.get("status") != "PASSED" else "")
                + f"; phases {json.dumps(r.get('phases'))}; workloads "
                + ", ".join(
                    f"{w['name']} {w['status']} {_f(w.get('median_us'), 1)} µs (record's ncu "
                    f"{_f(w.get('kernel_duration_us'), 1)}{'; ' + w['kernel_duration_skipped'][:120] if w.get('kernel_duration_skipped') else ''})"
                    for w in r.get("workloads", [])
                )
            )
        ncu = p.get("ncu") or {}
        if ncu:
            lines.append(
                f"- ncu: {_f(ncu.get('us'), 1)} µs, {ncu.get('kernels_per_call')} kernel(s) a call {ncu.get('kernels')}"
                + (f"; ERROR {ncu['error'][:300]}{_stderr(ncu)}" if ncu.get("error") else "")
            )
        lines.append("")
    if result.get("import"):
        lines += ["`gpuarena import kernelbench`:", "", "```", result["import"].strip(), "```", ""]
    return "\n".join(lines)


# -- processes --------------------------------------------------------------------------------
LIVE: set[int] = set()
"""Process groups of the sides running now: killed with the bench when it is told to stop."""


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(signum: int, frame: Any) -> None:
    """SIGTERM (validate.sh's step limit) or SIGINT: the sides' groups go too, not only this
    process (they run in their own sessions, which `timeout` does not reach)."""
    for pgid in list(LIVE):
        _kill_group(pgid)
    raise SystemExit(128 + signum)


def run_process(
    cmd: list[str], timeout: float, cwd: Path | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """CMD in its own process group, timed from outside; on a timeout the whole group is killed
    (gpuarena's workers with it). Never raises for the command's own failure."""
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env if env is not None else child_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        return {"rc": None, "stdout": "", "stderr": str(exc), "wall_s": 0.0, "timed_out": False}
    LIVE.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        timed_out = True
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # something outside the group holds its pipes: give up on them
            proc.kill()
            out, err = "", "(its output pipes stayed open 30 s after the kill)"
    finally:
        LIVE.discard(proc.pid)
    wall = time.perf_counter() - started
    return {
        "rc": proc.returncode,
        "stdout": out or "",
        "stderr": err or "",
        "wall_s": round(wall, 3),
        "timed_out": timed_out,
    }


def run_kernelbench(
    kernelbench: Path, problem_file: Path, solution: Path, backend: str, scratch: Path, timeout: float
) -> dict[str, Any]:
    """One KernelBench verdict: a fresh `--kb-child` process in SCRATCH (its build folder)."""
    cmd = [sys.executable, str(SCRIPT), "--kb-child", "--kernelbench", str(kernelbench)]
    cmd += ["--problem-file", str(problem_file), "--solution-file", str(solution), "--backend", backend]
    scratch.mkdir(parents=True, exist_ok=True)
    done = run_process(cmd, timeout, cwd=scratch)
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    child = result_line(done["stdout"])
    if child is None:
        why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}, no result line"
        return row | {"error": why, "stderr": tail(done["stderr"]), "stdout": tail(done["stdout"], 1000)}
    row |= {
        k: child[k] for k in ("import_s", "eval_s", "stubbed", "static", "arch", "error") if child.get(k) is not None
    }
    kb = child.get("result")
    if kb is None:
        row["error"] = row.get("error") or "eval_kernel_against_ref returned None (a build lock; KernelBench retries)"
        row["stderr"] = tail(done["stderr"])
        return row
    stats = kb.get("runtime_stats") or {}
    ref_stats = kb.get("ref_runtime_stats") or {}
    runtime = kb.get("runtime", -1.0)
    ref_runtime = kb.get("ref_runtime", -1.0)
    row |= {
        "compiled": kb.get("compiled"),
        "correctness": kb.get("correctness"),
        "runtime_ms": runtime,
        "runtime_us": runtime * 1e3 if runtime is not None and runtime >= 0 else None,
        "runtime_stats": stats,
        "ref_runtime_us": ref_runtime * 1e3 if ref_runtime is not None and ref_runtime >= 0 else None,
        "ref_runtime_stats": ref_stats,
        "metadata": {k: str(v)[:500] for k, v in (kb.get("metadata") or {}).items()},
    }
    if not kb.get("correctness"):
        row["stderr"] = tail(done["stderr"])
        row["stdout"] = tail(done["stdout"], 1500)
    return row


def run_gpuarena(problem: Path, solution: Path, timeout: float) -> dict[str, Any]:
    """One `gpuarena run --mode ranked` process, timed from outside; the record's figures."""
    cmd = [sys.executable, "-m", "gpuarena", "run", str(problem), str(solution)]
    cmd += ["--mode", "ranked", "--device", "cuda", "--json"]
    done = run_process(cmd, timeout)
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    try:
        record = json.loads(done["stdout"])
    except json.JSONDecodeError:
        why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}, no JSON record"
        return row | {"error": why, "stderr": tail(done["stderr"], 3000), "stdout": tail(done["stdout"], 1000)}
    return row | record_figures(record)


def record_figures(record: dict[str, Any]) -> dict[str, Any]:
    """Status, phases and per workload the median and the record's ncu figure; the
    `kernelbench` workload's (the file's own sizes) are the problem's."""
    workloads = []
    for w in record.get("workloads") or []:
        t, ref = w.get("time") or {}, w.get("reference_time") or {}
        workloads.append(
            {
                "name": w.get("name"),
                "status": w.get("status"),
                "median_us": t.get("median_us"),
                "samples": t.get("samples"),
                "kernel_duration_us": t.get("kernel_duration_us"),
                "kernel_duration_skipped": w.get("kernel_duration_skipped") or None,
                "reference_median_us": ref.get("median_us"),
                "reference_kernel_duration_us": ref.get("kernel_duration_us"),
                "speedup": w.get("speedup"),
            }
        )
    main = next((w for w in workloads if w["name"] == "kernelbench"), None)
    if main is None:
        main = next((w for w in reversed(workloads) if w["median_us"] is not None), {})
    return {
        "status": record.get("status"),
        "reason": (record.get("reason") or "")[:500],
        "duration_s": record.get("duration_s"),
        "phases": record.get("phases"),
        "workload": main.get("name"),
        "median_us": main.get("median_us"),
        "kernel_duration_us": main.get("kernel_duration_us"),
        "workloads": workloads,
    }


def run_ncu(ncu: str, problem_file: Path, solution: Path, calls: int, timeout: float) -> dict[str, Any]:
    """ncu's gpu__time_duration.sum over each call's kernels (NVTX range), median over calls."""
    cmd = [ncu, "--metrics", NCU_METRIC, "--clock-control", "none", "--cache-control", "all", "--csv"]
    cmd += ["--target-processes", "all", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/"]
    cmd += [sys.executable, str(SCRIPT), "--ncu-child", "--problem-file", str(problem_file)]
    cmd += ["--solution-file", str(solution), "--calls", str(calls)]
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


def import_gpuarena(files: list[Path], into: Path, timeout: float) -> tuple[dict[str, Path], str]:
    """`gpuarena import kernelbench FILES -o INTO --keep-failing`; each file's problem folder
    (by its problem.toml's provenance), and the importer's output."""
    cmd = [sys.executable, "-m", "gpuarena", "import", "kernelbench", *map(str, files), "-o", str(into)]
    done = run_process(cmd + ["--keep-failing"], timeout)
    folders: dict[str, Path] = {}
    for toml in into.rglob("problem.toml") if into.exists() else []:
        try:
            operator = tomllib.loads(toml.read_text()).get("provenance", {}).get("operator")
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if operator:
            folders[f"{toml.parent.parent.name}/{operator}"] = toml.parent
    log = tail(done["stdout"], 3000) + ("\n" + tail(done["stderr"], 2000) if done["stderr"].strip() else "")
    if done["timed_out"]:
        log += f"\n(timed out after {timeout:.0f} s)"
    return folders, log


# -- the children -----------------------------------------------------------------------------
def _stand_in(name: str) -> types.ModuleType:
    """An empty module for NAME: any name imported from it is a function that raises."""
    module = types.ModuleType(name, f"empty stand-in for {name}, by bench/peer_kernelbench.py: {UNCALLED[name]}")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{name} is an empty stand-in in bench/peer_kernelbench.py: {UNCALLED[name]}")

    def attribute(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return refuse

    module.__getattr__ = attribute  # type: ignore[method-assign]
    if name == "dotenv":
        module.load_dotenv = lambda *args, **kwargs: False  # type: ignore[attr-defined]
    return module


def load_kernelbench(root: Path) -> tuple[Any, list[str], list[str]]:
    """KernelBench's eval module from ROOT/src, its uncalled imports stood in for where missing:
    (kernelbench.eval, the stubbed names, the top-level packages the import brought in)."""
    before = {m.split(".")[0] for m in sys.modules}
    stubbed = []
    for name in UNCALLED:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = _stand_in(name)
            stubbed.append(name)
    sys.path.insert(0, str(root / "src"))
    kb_eval = importlib.import_module("kernelbench.eval")
    brought = {m.split(".")[0] for m in sys.modules} - before - {"kernelbench"} - set(stubbed)
    return kb_eval, stubbed, sorted(m for m in brought if not m.startswith("_") and m not in sys.stdlib_module_names)


def kb_child(args: argparse.Namespace) -> dict[str, Any]:
    """One KernelBench verdict, as scripts/run_and_check.py's local path runs it."""
    started = time.perf_counter()
    out: dict[str, Any] = {"result": None}
    kb_eval, out["stubbed"], out["imported"] = load_kernelbench(args.kernelbench)
    import torch
    from kernelbench.kernel_static_checker import validate_kernel_static
    from kernelbench.utils import set_gpu_arch

    out["import_s"] = round(time.perf_counter() - started, 3)
    ref_src = Path(args.problem_file).read_text()
    kernel_src = Path(args.solution_file).read_text()
    valid, errors, warnings = validate_kernel_static(
        kernel_src, backend=args.backend, precision=KB_SETTINGS["precision"]
    )
    out["static"] = {"valid": valid, "errors": errors, "warnings": warnings}
    device = torch.device("cuda:0")
    out["arch"] = gpu_arch(torch.cuda.get_device_capability(device)) if torch.cuda.is_available() else None
    if out["arch"]:
        set_gpu_arch([out["arch"]])
    build_dir = os.path.join("test_build", str(hash(kernel_src)))  # run_and_check.py's, under the cwd
    t0 = time.perf_counter()
    try:
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=kernel_src,
            measure_performance=KB_SETTINGS["measure_performance"],
            timing_method=KB_SETTINGS["timing_method"],
            verbose=KB_SETTINGS["verbose"],
            num_correct_trials=KB_SETTINGS["num_correct_trials"],
            num_perf_trials=KB_SETTINGS["num_perf_trials"],
            build_dir=build_dir,
            device=device,
            backend=args.backend,
            precision=kb_eval.get_torch_dtype_from_string(KB_SETTINGS["precision"]),
        )
        out["result"] = None if result is None else json.loads(json.dumps(result.model_dump(), default=str))
    except Exception as exc:  # run_and_check.py's last-level catch: a verdict, not a crash
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["result"] = {"compiled": False, "correctness": False, "metadata": {"other_error": str(exc)[:2000]}}
    out["eval_s"] = round(time.perf_counter() - t0, 3)
    return out


def ncu_child(args: argparse.Namespace) -> None:
    """The process ncu profiles: ModelNew at the file's sizes, CALLS calls in NVTX ranges."""
    import torch

    context: dict[str, Any] = {}
    exec(compile(Path(args.problem_file).read_text(), str(args.problem_file), "exec"), context)
    spec = importlib.util.spec_from_file_location("peer_kb_solution", args.solution_file)
    assert spec is not None and spec.loader is not None
    solution = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(solution)
    torch.manual_seed(SEED)
    init = context["get_init_inputs"]()
    with torch.no_grad():
        torch.manual_seed(SEED)
        model = solution.ModelNew(*init).cuda()
        with torch.device("cuda"):  # the inputs drawn on the GPU: the same shapes, seconds sooner
            torch.manual_seed(SEED)
            inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in context["get_inputs"]()]
        for _ in range(3):  # builds and autotuning, outside the ranges
            model(*inputs)
        torch.cuda.synchronize()
        for _ in range(args.calls):
            torch.cuda.nvtx.range_push(NVTX_RANGE)
            model(*inputs)
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()


# -- the parent -------------------------------------------------------------------------------
def kernelbench_rev(root: Path) -> str | None:
    rev = root / "REVISION"
    return rev.read_text().strip() if rev.exists() else None


def solutions_for(names: list[str], extra: list[tuple[str, Path, str]], into: Path) -> dict[str, tuple[str, Path]]:
    """Each problem's (backend, ModelNew file), written into INTO (the built-in ones)."""
    into.mkdir(parents=True, exist_ok=True)
    chosen: dict[str, tuple[str, Path]] = {}
    given = {name: (backend, path) for name, path, backend in extra}
    for name in names:
        if name in given:
            backend, path = given[name]
            chosen[name] = (backend, into / f"{slug(name)}.py")
            chosen[name][1].write_text(path.read_text())
        elif name in SOLUTIONS:
            backend, source = SOLUTIONS[name]
            chosen[name] = (backend, into / f"{slug(name)}.py")
            chosen[name][1].write_text(source)
    return chosen


def parent(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        print("peer_kernelbench: no CUDA device here; run this on the GPU machine.", file=sys.stderr)
        return 2
    names = problem_names(args.problems)
    files = {name: args.kernelbench / "KernelBench" / f"{name}.py" for name in names}
    ncu = None if args.no_ncu else find_ncu()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python3 bench/peer_kernelbench.py " + shlex.join(sys.argv[1:]),
        "kernelbench_rev": kernelbench_rev(args.kernelbench),
        "repeat": args.repeat,
        "settings": KB_SETTINGS,
        "ncu": ncu,
        "problems": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)

    def write() -> None:
        for p in result["problems"]:
            p["summary"] = summarize(p)
        (args.out / "peer-kernelbench.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
        (args.out / "peer-kernelbench.md").write_text(markdown(result))

    with tempfile.TemporaryDirectory(prefix="peer-kb-") as tmp:
        scratch = Path(tmp)
        solutions = solutions_for(names, args.solution or [], scratch / "solutions")
        for name in names:
            entry: dict[str, Any] = {"name": name, "kernelbench": [], "gpuarena": [], "ncu": None}
            if not files[name].exists():
                entry["error"] = f"no problem file {files[name]}"
            elif name not in solutions:
                entry["error"] = "no ModelNew for it (built in or --solution)"
            else:
                entry["backend"], entry["solution"] = solutions[name][0], str(solutions[name][1].name)
            result["problems"].append(entry)
        runnable = [p for p in result["problems"] if "error" not in p]
        folders, result["import"] = import_gpuarena([files[p["name"]] for p in runnable], scratch / "imported", 600)
        print(result["import"], flush=True)
        write()
        for rep in range(args.repeat):
            for p in runnable:
                name, (backend, solution) = p["name"], solutions[p["name"]]
                kb = run_kernelbench(
                    args.kernelbench, files[name], solution, backend, scratch / "kb" / slug(name), args.timeout
                )
                p["kernelbench"].append(kb)
                print(f"[{rep + 1}/{args.repeat}] {name} KernelBench {kb['wall_s']} s", _brief(kb), flush=True)
                folder = folders.get(f"{files[name].parent.name}/{files[name].name}")
                if folder is None:
                    ga: dict[str, Any] = {"wall_s": None, "error": "not imported (see the import's output)"}
                else:
                    ga = run_gpuarena(folder, solution, args.timeout)
                p["gpuarena"].append(ga)
                print(f"[{rep + 1}/{args.repeat}] {name} gpuarena {ga['wall_s']} s", _brief(ga), flush=True)
                if ncu and p["ncu"] is None:
                    p["ncu"] = run_ncu(ncu, files[name], solution, args.ncu_calls, args.timeout)
                    print(f"{name} ncu", p["ncu"].get("us"), p["ncu"].get("error", "")[:300], flush=True)
                write()
    write()
    md = markdown(result)
    table = [line for line in md.splitlines() if line.startswith("|")]
    print(md + "\n" + "\n".join(table), flush=True)  # the table last: validate.sh keeps the log's tail
    return 0


def _brief(row: dict[str, Any]) -> str:
    if row.get("error"):
        return f"ERROR {row['error'][:200]} {row.get('stderr', '')[-400:]}"
    if "correctness" in row:
        return f"correct {row.get('correctness')} runtime {row.get('runtime_us')} µs"
    return f"{row.get('status')} median {row.get('median_us')} µs ncu-in-record {row.get('kernel_duration_us')} µs"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernelbench", type=Path, help="a copy of KernelBench: src/kernelbench and KernelBench/levelN")
    p.add_argument("--problems", help=f"comma-separated levelN/NAME (default: {','.join(DEFAULT_PROBLEMS)})")
    p.add_argument(
        "--solution",
        action="append",
        type=parse_solution,
        metavar="PROBLEM=FILE[:BACKEND]",
        help="a ModelNew file for a problem (instead of the built-in one); BACKEND: KernelBench's, default cuda",
    )
    p.add_argument("--repeat", type=int, default=2, help="verdicts of each side per problem (default 2)")
    p.add_argument("--out", type=Path, help="folder for peer-kernelbench.json and .md")
    p.add_argument("--timeout", type=float, default=300, help="limit of one verdict, in seconds (default 300)")
    p.add_argument("--ncu-calls", type=int, default=5, help="calls profiled by ncu per problem (default 5)")
    p.add_argument("--no-ncu", action="store_true", help="leave ncu out")
    p.add_argument("--kb-child", action="store_true", help="(child) one KernelBench verdict")
    p.add_argument("--ncu-child", action="store_true", help="(child) the process ncu profiles")
    p.add_argument("--kb-imports", action="store_true", help="load KernelBench's eval module, say what it imported")
    p.add_argument("--problem-file", type=Path, help="(child) the KernelBench problem file")
    p.add_argument("--solution-file", type=Path, help="(child) the ModelNew file")
    p.add_argument("--backend", default="cuda", help="(child) KernelBench's backend")
    p.add_argument("--calls", type=int, default=5, help="(ncu child) calls in NVTX ranges")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.ncu_child:
        ncu_child(args)
        return 0
    if args.kernelbench is None:
        parser.error("--kernelbench is required")
    args.kernelbench = args.kernelbench.resolve()  # the children run in their own folders
    if args.kb_imports:  # a check on any machine: what KernelBench's eval pulls in, and what is stood in for
        _, stubbed, imported = load_kernelbench(args.kernelbench)
        print(json.dumps({"stubbed": stubbed, "imported": imported}))
        return 0
    if args.kb_child:
        print(RESULT_TAG + json.dumps(kb_child(args), default=str), flush=True)
        return 0
    if args.out is None:
        parser.error("--out is required")
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
