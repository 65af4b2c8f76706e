"""A whole verdict, gpuarena's beside GPU MODE's own, on one GPU MODE task and submission
(issue 47: "a full ranked verdict ... at most 0.6x GPU MODE's own test + leaderboard time").

GPU MODE's code is not in this repository: pass a checkout of github.com/gpu-mode/reference-kernels
(`bench/gpu/carry.sh` copies one into .gpu/ when GPUMODE_REPO names a local clone):

    python3 bench/peer_gpumode.py --reference-kernels .gpu/reference-kernels \\
        --task problems/pmpp/vectoradd_py --submission solutions/correct/submission_triton.py \\
        --repeat 3 --out DIR

GPU MODE's side: the task's files as its task.yml lists them, in a scratch folder, and its own
`eval.py` run the way its runner runs it (POPCORN_FD, one process per mode): `test` on the
task's tests, `leaderboard` on its benchmarks (the ranked mode: the last benchmark, inputs
redrawn and checked every run), and `benchmark` on every benchmark. Each wall time includes
the Python process, as a submitter waits for it.

gpuarena's side: `gpuarena import gpumode` of the same task folder, then the same submission
file, unmodified, through `gpuarena run --mode ranked` (every test and benchmark a workload,
correctness on each, timing and the device audit on each timed one), and `--mode test`. Each
wall time is the whole `gpuarena run` process; the record's phases and each workload's audit
cost (`device_audit.seconds`) say where it went. Served warm, as an agent's run-many serves it
(--warm), and served as a contest's participant gets it (--served: `gpuarena serve` and
`gpuarena runner` on cuda:0, new submissions through the API, each timed from the request that
makes it to the answer that says it is done).

Writes DIR/peer-gpumode.json and DIR/peer-gpumode.md."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml


def gpumode_folder(task: Path, submission: Path, into: Path) -> None:
    """The files task.yml lists, as GPU MODE's runner lays them out."""
    spec = yaml.safe_load((task / "task.yml").read_text())
    for entry in spec["files"]:
        source = submission if entry["source"] == "@SUBMISSION@" else task / entry["source"]
        shutil.copy(source, into / entry["name"])
    for kind in ("tests", "benchmarks"):
        lines = ["; ".join(f"{k}: {v}" for k, v in case.items()) for case in spec[kind]]
        (into / f"{kind}.txt").write_text("\n".join(lines) + "\n")


def run_gpumode(
    folder: Path, mode: str, cases: str, env: dict[str, str] | None = None, timeout: float = 600
) -> dict[str, Any]:
    """One `eval.py MODE CASES` process, timed from outside; its POPCORN log kept."""
    read, write = os.pipe()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "eval.py", mode, cases],
        cwd=folder,
        env={**(os.environ if env is None else env), "POPCORN_FD": str(write)},
        pass_fds=(write,),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    wall = time.perf_counter() - started
    os.close(write)
    with os.fdopen(read) as log:
        popcorn = log.read()
    return {
        "mode": mode,
        "wall_s": round(wall, 3),
        "rc": done.returncode,
        "passed": "check: pass" in popcorn,
        "log": popcorn.splitlines()[-12:],
        "stderr": done.stderr[-2000:],
    }


def run_gpuarena(problem: Path, submission: Path, mode: str) -> dict[str, Any]:
    """One `gpuarena run` process, timed from outside; its record's phases and audit costs."""
    command = [
        sys.executable,
        "-m",
        "gpuarena",
        "run",
        str(problem),
        str(submission),
        "--device",
        "cuda",
        "--mode",
        mode,
        "--json",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    try:
        record = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"mode": mode, "wall_s": round(wall, 3), "rc": done.returncode, "stderr": done.stderr[-3000:]}
    return {"mode": mode, "wall_s": round(wall, 3), "rc": done.returncode, **verdict_of(record)}


def verdict_of(record: dict[str, Any]) -> dict[str, Any]:
    """A record's status and reason, phases, and each workload's figures and audit costs; a
    workload that did not pass keeps its reason and its whole device audit (why, to look into)."""
    workloads = []
    for w in record.get("workloads", []):
        audit = w.get("device_audit") or {}
        workloads.append(
            {
                "name": w["name"],
                "status": w["status"],
                "median_us": (w.get("time") or {}).get("median_us"),
                "samples": (w.get("time") or {}).get("samples"),
                "audit_s": audit.get("seconds"),
                "audit_requests": len(audit.get("observed_us_per_request") or []),
                "unswept_requests": len(audit.get("unswept_per_request") or []),
                "noise_us": audit.get("noise_us"),
                **({"reason": w.get("reason"), "device_audit": audit} if w["status"] != "PASSED" else {}),
            }
        )
    return {
        "status": record.get("status"),
        "reason": record.get("reason") or "",
        "duration_s": record.get("duration_s"),
        "phases": record.get("phases"),
        "workloads": workloads,
    }


def run_gpuarena_warm(problem: Path, submission: Path, copies: int) -> dict[str, Any]:
    """The same verdict served warm, as an agent's `run-stdin` or a runner serves it: one
    `gpuarena run-many --mode ranked` process judges `copies` distinct copies of the
    submission (each its own content hash and worker, nothing of one reused for the next);
    the verdicts after the first are the warm ones (each job's own seconds, as the process
    timed it from its request to its record)."""
    paths = []
    for i in range(copies):
        path = submission.with_name(f"warm_{i}_{submission.name}")
        path.write_text(f"# copy {i}: a distinct submission\n" + submission.read_text())
        paths.append(str(path))
    command = [sys.executable, "-m", "gpuarena", "run-many", str(problem), *paths]
    command += ["--device", "cuda", "--mode", "ranked", "--jsonl"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - started
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    jobs = [
        {"seconds": a.get("seconds"), **verdict_of(a.get("record") or {}), "status": a.get("status") or a.get("error")}
        for a in answers
    ]
    return {"wall_s": round(wall, 3), "rc": done.returncode, "jobs": jobs, "stderr": done.stderr[-2000:]}


def audit_share(runs: list[dict[str, Any]]) -> float:
    """The median share of the device audit in the records of these runs (nan: none has a record)."""
    shares = [(r.get("phases") or {}).get("device audit", 0.0) / r["duration_s"] for r in runs if r.get("duration_s")]
    return statistics.median(shares) if shares else float("nan")


def run_gpuarena_served(problems: Path, problem: Path, submission: Path, jobs: int) -> list[dict[str, Any]]:
    """The same verdict as a contest's participant gets it: `gpuarena serve` (SQLite) and one
    `gpuarena runner` on cuda:0 (its job process started ahead, as runners run by default),
    `jobs` distinct copies of the submission sent one at a time through the API, each timed
    from the request that makes it to the answer that says it is done
    (bench/job_latency.py). The first is the runner's first job: no process ahead of it."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from job_latency import Served, one_run

    name = problem.relative_to(problems).as_posix()
    served = Served(problems, name, submission, "cuda:0", "ranked", distinct=True)
    return one_run(True, jobs, 3.0, served)


def markdown(result: dict[str, Any]) -> str:
    gm, ga = result["gpumode"], result["gpuarena"]
    lines = [
        f"# GPU MODE's eval.py beside gpuarena: {result['task']} with {result['submission']}",
        "",
        f"Device: {result['device']}. Command: `{result['command']}`. Medians of {result['repeat']} runs.",
        "",
        "| verdict | median wall s | runs |",
        "| --- | --- | --- |",
    ]
    for name, runs in [*(("GPU MODE " + m, r) for m, r in gm.items()), *(("gpuarena " + m, r) for m, r in ga.items())]:
        lines.append(f"| {name} | {statistics.median(r['wall_s'] for r in runs):.2f} | {[r['wall_s'] for r in runs]} |")
    lines += [
        "",
        f"GPU MODE test + leaderboard: {result['gpumode_verdict_s']:.2f} s; gpuarena ranked: "
        f"{result['gpuarena_ranked_s']:.2f} s ({result['ratio']:.2f}x); the audit's share of the ranked "
        f"record: {result['audit_share']:.0%}.",
        "",
        f"A new submission on both sides (GPU MODE with an empty Triton cache for its test and leaderboard, "
        f"gpuarena a file it has not judged): GPU MODE {result['gpumode_new_verdict_s']:.2f} s, gpuarena ranked "
        f"{result['gpuarena_new_ranked_s']:.2f} s ({result['new_ratio']:.2f}x).",
        "",
    ]
    warm = result.get("gpuarena_warm")
    if warm:
        later = [j for j in warm["jobs"][1:] if j["seconds"] is not None]
        lines += [
            f"gpuarena ranked, served warm (`run-many`, {len(warm['jobs'])} distinct copies, one process): "
            f"first {warm['jobs'][0]['seconds'] if warm['jobs'] else None} s, then "
            f"{[j['seconds'] for j in later]} s a verdict ({result['warm_ratio']:.2f}x GPU MODE's test + leaderboard, "
            f"{result['warm_new_ratio']:.2f}x a new submission's: each copy is one); "
            f"statuses {[j['status'] for j in warm['jobs']]}"
            + "".join(f"; job {i + 1}: {j['reason']}" for i, j in enumerate(warm["jobs"]) if j.get("reason"))
            + ".",
            "",
            "Phases of the last warm verdict: " + json.dumps(later[-1]["phases"] if later else None),
            "",
        ]
    served = result.get("gpuarena_served")
    if served:
        lines += [
            f"gpuarena ranked, served (`gpuarena serve` and `gpuarena runner` on cuda:0, {len(served)} new "
            f"submissions through the API, one at a time; submit to result as the client saw it): "
            f"{[j['seconds'] for j in served]} s, statuses {[j['status'] for j in served]}; after the first "
            f"(the runner's first job) the median is {result['gpuarena_served_s']} s, "
            f"{result['served_new_ratio']:.2f}x GPU MODE's new submission; the audit's share of those records: "
            f"{result['served_audit_share']:.0%}"
            + "".join(f"; job {i + 1}: {j['reason']}" for i, j in enumerate(served) if j.get("reason"))
            + ".",
            "",
            "Phases of the last served verdict: " + json.dumps(served[-1].get("phases")),
            "",
        ]
    ranked = ga["ranked"][-1]
    lines += [
        "Phases of the last ranked run: " + json.dumps(ranked.get("phases")),
        "",
        "| workload | status | median µs | audit s | audit requests | unswept |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for w in ranked.get("workloads", []):
        lines.append(
            f"| {w['name']} | {w['status']} | {w['median_us']} | {w['audit_s']} | {w['audit_requests']} | {w['unswept_requests']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference-kernels", type=Path, required=True)
    parser.add_argument("--task", default="problems/pmpp/vectoradd_py")
    parser.add_argument("--submission", default="solutions/correct/submission_triton.py")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warm", type=int, default=4, help="distinct copies judged by one warm process (0: none)")
    parser.add_argument(
        "--served", type=int, default=4, help="new submissions judged through a server and a runner on cuda:0 (0: none)"
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    task = args.reference_kernels / args.task
    submission = task / args.submission
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    result: dict[str, Any] = {
        "task": args.task,
        "submission": args.submission,
        "repeat": args.repeat,
        "device": torch.cuda.get_device_name(0),
        "command": "python3 bench/peer_gpumode.py " + " ".join(sys.argv[1:]),
        "gpumode": {
            "test": [],
            "leaderboard": [],
            "benchmark": [],
            "test, new submission": [],
            "leaderboard, new submission": [],
        },
        "gpuarena": {"test": [], "ranked": [], "ranked, new submission": []},
    }
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "gpumode"
        folder.mkdir()
        gpumode_folder(task, submission, folder)
        imported = Path(scratch) / "imported"
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "gpuarena",
                "import",
                "gpumode",
                str(task),
                "-o",
                str(imported),
                "--check-device",
                "cuda",
            ],
            capture_output=True,
            text=True,
        )
        print(done.stdout[-2000:], done.stderr[-2000:], flush=True)
        problem = next(p.parent for p in imported.rglob("problem.toml"))
        mine = Path(scratch) / "submission.py"
        shutil.copy(submission, mine)
        for repeat in range(args.repeat):
            for mode, cases in (
                ("test", "tests.txt"),
                ("leaderboard", "benchmarks.txt"),
                ("benchmark", "benchmarks.txt"),
            ):
                result["gpumode"][mode].append(run_gpumode(folder, mode, cases))
                print("gpumode", mode, result["gpumode"][mode][-1]["wall_s"], flush=True)
            # a new submission: Triton's cache empty for GPU MODE (one for its test and leaderboard
            # runs, as one container would hold), a file of another hash for gpuarena (whose kept
            # builds are per solution)
            fresh = {**os.environ, "TRITON_CACHE_DIR": str(Path(scratch) / f"triton-cache-{repeat}")}
            for mode, cases in (("test", "tests.txt"), ("leaderboard", "benchmarks.txt")):
                result["gpumode"][f"{mode}, new submission"].append(run_gpumode(folder, mode, cases, env=fresh))
            for mode in ("test", "ranked"):
                result["gpuarena"][mode].append(run_gpuarena(problem, mine, mode))
                r = result["gpuarena"][mode][-1]
                print("gpuarena", mode, r["wall_s"], r.get("status"), r.get("phases"), flush=True)
            new = Path(scratch) / f"new_{repeat}_submission.py"
            new.write_text(f"# new submission {repeat}\n" + submission.read_text())
            result["gpuarena"]["ranked, new submission"].append(run_gpuarena(problem, new, "ranked"))
        if args.warm:
            result["gpuarena_warm"] = run_gpuarena_warm(problem, mine, args.warm)
            print("gpuarena warm", json.dumps(result["gpuarena_warm"])[:3000], flush=True)
        if args.served:
            result["gpuarena_served"] = run_gpuarena_served(imported, problem, submission, args.served)
            print("gpuarena served", json.dumps(result["gpuarena_served"])[:3000], flush=True)

    def median(runs: list[dict[str, Any]]) -> float:
        return statistics.median(r["wall_s"] for r in runs)

    result["gpumode_verdict_s"] = median(result["gpumode"]["test"]) + median(result["gpumode"]["leaderboard"])
    result["gpuarena_ranked_s"] = median(result["gpuarena"]["ranked"])
    result["ratio"] = result["gpuarena_ranked_s"] / result["gpumode_verdict_s"]
    result["gpumode_new_verdict_s"] = median(result["gpumode"]["test, new submission"]) + median(
        result["gpumode"]["leaderboard, new submission"]
    )
    result["gpuarena_new_ranked_s"] = median(result["gpuarena"]["ranked, new submission"])
    result["new_ratio"] = result["gpuarena_new_ranked_s"] / result["gpumode_new_verdict_s"]
    warm_jobs = [j["seconds"] for j in (result.get("gpuarena_warm") or {"jobs": []})["jobs"][1:] if j["seconds"]]
    result["gpuarena_warm_ranked_s"] = statistics.median(warm_jobs) if warm_jobs else None
    result["warm_ratio"] = result["gpuarena_warm_ranked_s"] / result["gpumode_verdict_s"] if warm_jobs else float("nan")
    result["warm_new_ratio"] = (
        result["gpuarena_warm_ranked_s"] / result["gpumode_new_verdict_s"] if warm_jobs else float("nan")
    )
    served = [j["seconds"] for j in result.get("gpuarena_served", [])[1:] if j["status"] == "PASSED"]
    result["gpuarena_served_s"] = statistics.median(served) if served else None
    result["served_new_ratio"] = (
        result["gpuarena_served_s"] / result["gpumode_new_verdict_s"] if served else float("nan")
    )
    result["served_audit_share"] = audit_share(result.get("gpuarena_served", [])[1:])
    result["audit_share"] = audit_share(result["gpuarena"]["ranked"])
    (args.out / "peer-gpumode.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / "peer-gpumode.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
