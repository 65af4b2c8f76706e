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
measured.

Its parts: bench/peer_common.py (processes, gpuarena's side, ncu, the files; shared with
bench/peer_flashinfer.py), bench/peer_kernelbench_eval.py (KernelBench's eval in the `--kb-child`
process) and bench/peer_kernelbench_solutions.py (the built-in ModelNew files)."""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.util
import json
import shlex
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
BENCH = SCRIPT.parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from fidelity import find_ncu  # noqa: E402
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
from peer_kernelbench_eval import KB_SETTINGS, kb_child, load_kernelbench  # noqa: E402
from peer_kernelbench_solutions import SOLUTIONS  # noqa: E402

DEFAULT_PROBLEMS = (
    "level1/1_Square_matrix_multiplication_",
    "level1/23_Softmax",
    "level1/19_ReLU",
    "level2/12_Gemm_Multiply_LeakyReLU",
)
RESULT_TAG = "PEER_KB_RESULT="
NVTX_RANGE = "peer_kb_call"
SEED = 42  # KernelBench's eval seeds torch with 42 before the inputs and before each model


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


def _workload(w: dict[str, Any]) -> str:
    skipped = w.get("kernel_duration_skipped")
    return (
        f"{w['name']} {w['status']} {fmt(w.get('median_us'), 1)} µs (record's ncu "
        f"{fmt(w.get('kernel_duration_us'), 1)}{'; ' + skipped[:120] if skipped else ''})"
    )


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
            f"| {p['name']} | {p.get('backend')} | {fmt(s['kb_wall_s'])} | {s['kb_correct']} | {fmt(s['kb_runtime_us'], 1)} "
            f"| {fmt(s['ga_wall_s'])} | {', '.join(map(str, s['ga_status']))} | {fmt(s['ga_median_us'], 1)} "
            f"| {fmt(s['ga_kernel_duration_us'], 1)} | {fmt(s['ncu_us'], 1)} | {fmt(s['kb_over_ncu'], 3)} "
            f"| {fmt(s['ga_over_ncu'], 3)} | {fmt(s['ga_record_ncu_over_ncu'], 3)} | {fmt(s['wall_ga_over_kb'])} |"
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
                lines.append(f"- KernelBench: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{stderr_note(r)}")
                continue
            static = r.get("static") or {}
            lines.append(
                f"- KernelBench: wall {r.get('wall_s')} s (import {r.get('import_s')} s, eval {r.get('eval_s')} s), "
                f"compiled {r.get('compiled')}, correct {r.get('correctness')}, runtime {fmt(r.get('runtime_us'), 1)} µs "
                f"(stats in ms {json.dumps(r.get('runtime_stats'))}), reference {fmt(r.get('ref_runtime_us'), 1)} µs; "
                f"static check valid {static.get('valid')}"
                + (f" (errors: {'; '.join(static.get('errors') or [])})" if static.get("errors") else "")
                + (f"; ERROR {r['error'][:300]}{stderr_note(r)}" if r.get("error") else "")
            )
        lines += [gpuarena_line(r, _workload) for r in p["gpuarena"]]
        if p.get("ncu"):
            lines.append(ncu_line("ncu", p["ncu"]))
        lines.append("")
    if result.get("import"):
        lines += ["`gpuarena import kernelbench`:", "", "```", result["import"].strip(), "```", ""]
    return "\n".join(lines)


def run_kernelbench(
    kernelbench: Path, problem_file: Path, solution: Path, backend: str, scratch: Path, timeout: float
) -> dict[str, Any]:
    """One KernelBench verdict: a fresh `--kb-child` process in SCRATCH (its build folder)."""
    cmd = [sys.executable, str(SCRIPT), "--kb-child", "--kernelbench", str(kernelbench)]
    cmd += ["--problem-file", str(problem_file), "--solution-file", str(solution), "--backend", backend]
    scratch.mkdir(parents=True, exist_ok=True)
    done = run_process(cmd, timeout, cwd=scratch)
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    child = result_line(done["stdout"], RESULT_TAG)
    if child is None:
        return row | no_result(done, timeout, "no result line")
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


def run_ncu(ncu: str, problem_file: Path, solution: Path, calls: int, timeout: float) -> dict[str, Any]:
    """ncu's gpu__time_duration.sum over each call's kernels (NVTX range), median over calls."""
    child = [sys.executable, str(SCRIPT), "--ncu-child", "--problem-file", str(problem_file)]
    child += ["--solution-file", str(solution), "--calls", str(calls)]
    return ncu_reading(ncu, NVTX_RANGE, child, calls, timeout)


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
        profile_calls(model, inputs, args.calls, NVTX_RANGE)


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
    catch_stop()

    def write() -> None:
        for p in result["problems"]:
            p["summary"] = summarize(p)
        write_result(args.out, "peer-kernelbench", result, markdown(result))

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
                    ga = run_gpuarena(folder, solution, "ranked", "cuda", args.timeout)
                p["gpuarena"].append(ga)
                print(f"[{rep + 1}/{args.repeat}] {name} gpuarena {ga['wall_s']} s", _brief(ga), flush=True)
                if ncu and p["ncu"] is None:
                    p["ncu"] = run_ncu(ncu, files[name], solution, args.ncu_calls, args.timeout)
                    print(f"{name} ncu", p["ncu"].get("us"), p["ncu"].get("error", "")[:300], flush=True)
                write()
    write()
    print_report(markdown(result))  # the table last: validate.sh keeps the log's tail
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
