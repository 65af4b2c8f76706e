"""Throughput of one runner host with 1 GPU, then 2 GPUs (one worker per GPU).

A server (`gpuarena serve --no-runner`, SQLite in a temporary folder) and one runner
(`gpuarena runner --devices cuda:0`, then a fresh one with `--devices cuda:0,cuda:1`); each
phase runs the same `gpuarena batch` of --jobs jobs and the batch's wall time gives jobs per
minute. Before the timed phases, a warm-up job runs on each GPU alone (CUDA context, the
device's measured peaks, build caches), so neither phase pays a cold start the other does
not. Recorded under bench/results/multi-gpu-<kind>-<date>.json: both phases (wall time,
jobs/min, jobs per device slot, verdicts), the ratio (ideal 2.0) and the machine.

On a 2-GPU NVIDIA machine (both GPUs of one kind), from the repository root:

    . .venv/bin/activate      # or: export PYTHONPATH=$PWD/src with torch installed
    python bench/multi_gpu.py --jobs 40

Where one command has a time limit (the device tool: 10 minutes a call), run the phases in
separate calls on the same machine and merge their records:

    python bench/multi_gpu.py --jobs 40 --phase 1 --out $OUT/phase1.json   # call 1
    python bench/multi_gpu.py --jobs 40 --phase 2 --out $OUT/phase2.json   # call 2
    python bench/multi_gpu.py --combine phase1.json phase2.json            # here

Measured on 2 x H200 (2026-11-22): a level1/softmax job in benchmark mode takes about 17 s
in its worker (9 workloads, up to 1 GB each) and 24 s from claim to result, so 40 of them on
one GPU do not fit one call. The small fixture problem fits: --problems tests/fixtures/problems
--problem axpy_dest --solution tests/fixtures/solutions/dest_good.py. With it (2026-11-23,
bench/results/multi-gpu-H200-2026-11-23.json): 343 s for 40 jobs on one GPU, 175 s on two,
ratio 1.96. The record is rewritten after each phase, so a phase cut off by a time limit
keeps the ones before it; --logs DIR keeps the server's and runners' logs.

It takes about (jobs x 1.5) x (seconds per job) in all. Without a GPU, the same logic runs with two fake devices on the CPU:

    python bench/multi_gpu.py --fake-cpu --jobs 6 --out /tmp/multi-gpu-fake.json

(--fake-cpu maps the devices to cpu:0 and cpu:0,cpu:1, serves the CPU-sized test problem
tests/fixtures/problems/axpy_dest with tests/fixtures/solutions/dest_good.py, budget
0.05 s; on a machine with few cores its ratio says nothing about GPUs.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import CLI, ROOT, cli, free_port, machine, wait_healthy


def gpu_names() -> list[str]:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,uuid", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]
    except (OSError, subprocess.SubprocessError):
        return []


def start_runner(
    env: dict, name: str, devices: list[str], server: str, token: str, budget: float, log: Path
) -> subprocess.Popen:
    with open(log, "a") as f:
        return subprocess.Popen(
            [
                *CLI,
                "runner",
                "--name",
                name,
                "--devices",
                ",".join(devices),
                "--server",
                server,
                "--token",
                token,
                "--budget",
                str(budget),
                "--health-interval",
                "0",
            ],
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
        )


def wait_runner(
    server: str, token: str, name: str, devices: list[str], kind: str, process: subprocess.Popen, timeout: float = 300
) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"runner {name} exited with {process.returncode} (see its log)")
        found = [
            r
            for r in httpx.get(server + "/api/runners", headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
            if r["name"] == name and r["online"]
        ]
        if found:
            slots = {d["device"]: d for d in found[0]["devices"]}
            sick = [f"{d}: {slots[d]['reason']}" for d in devices if d in slots and not slots[d]["healthy"]]
            if sick:
                raise SystemExit(f"runner {name}: drained devices: {'; '.join(sick)}")
            if set(devices) <= set(slots) and kind in found[0]["device_kinds"]:
                return
        time.sleep(0.5)
    raise SystemExit(f"runner {name} did not come online with {devices}")


def stop(process: subprocess.Popen) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def run_batch(
    env: dict, server: str, token: str, problem: str, solution: Path, kind: str, mode: str, jobs: int, prefix: Path
) -> dict:
    done = subprocess.run(
        [
            *CLI,
            "batch",
            "--problem",
            problem,
            "--solution",
            str(solution),
            "--device",
            kind,
            "--mode",
            mode,
            "--repeat",
            str(jobs),
            "--server",
            server,
            "--token",
            token,
            "--out",
            str(prefix),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if not prefix.with_name(prefix.name + ".json").is_file():
        raise SystemExit(f"gpuarena batch wrote no results ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return json.loads(prefix.with_name(prefix.name + ".json").read_text())


def phase_record(devices: list[str], table: dict) -> dict:
    rows = table["rows"]
    per_slot: dict[str, int] = {}
    for row in rows:
        per_slot[row["runner_device"] or "-"] = per_slot.get(row["runner_device"] or "-", 0) + 1
    elapsed = table["elapsed_s"]
    return {
        "devices": devices,
        "jobs": len(rows),
        "wall_s": elapsed,
        "jobs_per_min": round(len(rows) / elapsed * 60, 2) if elapsed else None,
        "jobs_per_device": per_slot,
        "verdicts": table["summary"],
    }


PHASES = {"both": (1, 2), "1": (1,), "2": (2,)}


def finish(record: dict) -> dict:
    """The ratio of the 2-device phase's throughput to the 1-device phase's, once both ran."""
    by_count = {len(p["devices"]): p for p in record["phases"]}
    one, two = by_count.get(1), by_count.get(2)
    ratio = (
        round(two["jobs_per_min"] / one["jobs_per_min"], 3)
        if one and two and one["jobs_per_min"] and two["jobs_per_min"]
        else None
    )
    return record | {
        "throughput_ratio": ratio,
        "ideal_ratio": 2.0,
        "scaling_efficiency": round(ratio / 2, 3) if ratio else None,
        "all_passed": all(p["verdicts"] == {"PASSED": p["jobs"]} for p in record["phases"]),
        "both_devices_used": two is not None
        and len([d for d in two["jobs_per_device"] if d in record["devices"]]) == 2,
    }


def combine(paths: list[Path]) -> dict:
    """One record from phase records written by separate runs (--phase 1, then --phase 2), e.g.
    two device-tool calls on one machine when both phases do not fit one call's time limit."""
    records = [json.loads(p.read_text()) for p in paths]
    base = records[0]
    if any(
        r["kind"] != base["kind"]
        or r["devices"] != base["devices"]
        or r["problem"] != base["problem"]
        or r["mode"] != base["mode"]
        or r["jobs_per_phase"] != base["jobs_per_phase"]
        for r in records
    ):
        raise SystemExit("--combine: the records differ in kind, devices, problem, mode or jobs")
    phases = [p for r in records for p in r["phases"]]
    return finish(
        base | {"phases": phases, "command": [r["command"] for r in records], "date": [r["date"] for r in records]}
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=40, help="jobs per phase (at least 40 for the recorded result)")
    parser.add_argument("--fake-cpu", action="store_true", help="two fake devices on the CPU (no GPU needed)")
    parser.add_argument("--gpus", default="cuda:0,cuda:1", help="the two GPUs, as the runner names them")
    parser.add_argument("--problem", default=None, help="[default: level1/softmax; --fake-cpu: axpy_dest]")
    parser.add_argument(
        "--solution",
        type=Path,
        default=None,
        help="[default: examples/softmax/pytorch.py; --fake-cpu: tests/fixtures/solutions/dest_good.py]",
    )
    parser.add_argument("--mode", default="benchmark")
    parser.add_argument("--budget", type=float, default=None, help="timing budget per workload [0.5; --fake-cpu 0.05]")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--phase",
        choices=sorted(PHASES),
        default="both",
        help="run only the 1-device or the 2-device phase (its record can be --combine'd later)",
    )
    parser.add_argument(
        "--problems", type=Path, default=None, help="problem folder for the server (gpuarena serve --problems)"
    )
    parser.add_argument(
        "--combine",
        type=Path,
        nargs=2,
        metavar="RECORD",
        default=None,
        help="merge the records of a --phase 1 and a --phase 2 run into --out; runs nothing",
    )
    parser.add_argument("--logs", type=Path, default=None, help="copy the server's and runners' logs here at the end")
    parser.add_argument("--no-warmup", action="store_true", help="skip the warm-up job on each device (quicker tests)")
    args = parser.parse_args()
    # a time limit's SIGTERM still stops the server and copies the logs (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.combine:
        record = combine(args.combine)
        out = args.out or ROOT / "bench" / "results" / f"multi-gpu-{record['kind']}-{dt.date.today().isoformat()}.json"
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps({k: record[k] for k in ("kind", "throughput_ratio", "all_passed", "both_devices_used")}))
        return 0 if record["all_passed"] else 1

    if args.fake_cpu:
        devices, kind = ["cpu:0", "cpu:1"], "cpu"
        problem, solution = args.problem or "axpy_dest", args.solution or ROOT / "tests/fixtures/solutions/dest_good.py"
        budget, extra = args.budget or 0.05, ["--problems", str(ROOT / "tests" / "fixtures" / "problems")]
    else:
        from gpuarena.runner.devices import parse_devices

        slots = parse_devices(args.gpus, "--gpus")
        if len(slots) != 2 or len({s.kind for s in slots}) != 1 or not all(s.device.startswith("cuda") for s in slots):
            raise SystemExit(
                f"--gpus {args.gpus}: need two GPUs of one kind, found {[(s.device, s.kind) for s in slots]}"
            )
        devices, kind = [s.device for s in slots], slots[0].kind
        problem, solution = args.problem or "level1/softmax", args.solution or ROOT / "examples/softmax/pytorch.py"
        budget, extra = args.budget or 0.5, ["--problems", str(args.problems.resolve())] if args.problems else []
    solution = Path(solution).resolve()

    work = Path(tempfile.mkdtemp(prefix="gpuarena-multi-gpu-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUARENA_")}
    env.update(
        GPUARENA_HOME=str(work / "home"),
        GPUARENA_SUBMIT_LIMIT="0",
        GPUARENA_MAX_IN_FLIGHT="0",
        XDG_CONFIG_HOME=str(work / "config"),
        PYTHONPATH=str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
    )
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(work / "server.log", "w") as log:
        server = subprocess.Popen(
            [*CLI, "serve", "--no-runner", "--port", str(port), *extra], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    started = dt.datetime.now(dt.UTC)
    try:
        wait_healthy(url, timeout=300, process=server)
        user = cli(env, "users", "add", "bench").split()[-1]
        fleet = cli(env, "users", "add", "bench-host", "--role", "runner").split()[-1]

        # warm-up: one job on each device alone
        for device in [] if args.no_warmup else devices[: max(PHASES[args.phase])]:
            name = f"warmup-{device.replace(':', '')}"
            runner = start_runner(env, name, [device], url, fleet, budget, work / f"{name}.log")
            wait_runner(url, user, name, [device], kind, runner)
            warm = run_batch(env, url, user, problem, solution, kind, args.mode, 1, work / name)
            stop(runner)
            if warm["summary"] != {"PASSED": 1}:
                raise SystemExit(f"warm-up on {device} did not pass: {warm['summary']} {warm['rows'][0]['reason']}")

        label = "fake-cpu" if args.fake_cpu else kind
        out = args.out or ROOT / "bench" / "results" / f"multi-gpu-{label}-{dt.date.today().isoformat()}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "date": started.isoformat(timespec="seconds"),
            "command": " ".join(["python", "bench/multi_gpu.py", *sys.argv[1:]]),
            "fake_cpu": args.fake_cpu,
            "kind": kind,
            "problem": problem,
            "solution": str(solution.relative_to(ROOT)) if solution.is_relative_to(ROOT) else str(solution),
            "mode": args.mode,
            "budget_s": budget,
            "jobs_per_phase": args.jobs,
            "warmup": not args.no_warmup,
            "devices": devices,
            "phases": [],
            "machine": machine() | {"gpus": gpu_names()},
        }
        for count in PHASES[args.phase]:
            name = f"host-{count}dev"
            runner = start_runner(env, name, devices[:count], url, fleet, budget, work / f"{name}.log")
            wait_runner(url, user, name, devices[:count], kind, runner)
            table = run_batch(env, url, user, problem, solution, kind, args.mode, args.jobs, work / name)
            code = stop(runner)
            record = finish(
                record | {"phases": [*record["phases"], phase_record(devices[:count], table) | {"runner_exit": code}]}
            )
            # written after each phase: a phase that outlives a time limit keeps the ones before it
            out.write_text(json.dumps(record, indent=1) + "\n")
            print(json.dumps(record["phases"][-1]), flush=True)
    finally:
        stop(server)
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
            for log in work.glob("*.log"):
                shutil.copy(log, args.logs / log.name)
    print(
        json.dumps(
            {k: record[k] for k in ("kind", "jobs_per_phase", "throughput_ratio", "all_passed", "both_devices_used")}
        )
    )
    print(f"written to {out}; logs in {work}")
    return 0 if record["all_passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
