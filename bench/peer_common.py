"""What the peer benches (bench/peer_kernelbench.py, bench/peer_flashinfer.py) share: each side
run in its own process group with a time limit (the groups killed with the bench when it is told
to stop), a child's result line, gpuarena's side (`gpuarena run ... --json` and the record's
figures), ncu's reading of one call's kernels (fidelity.py's settings, parser and grouping), and
the pieces of their tables and result files.

Imported by the benches, which put bench/ on sys.path first; nothing here runs on its own."""

from __future__ import annotations

import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fidelity import NCU_METRIC, child_env, group_calls, parse_ncu_csv


# -- numbers and text -------------------------------------------------------------------------
def tail(text: str | bytes | None, n: int = 2000) -> str:
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return (text or "")[-n:].strip()


def median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if isinstance(r.get(key), int | float)]
    return statistics.median(values) if values else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def fmt(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"{x:.{digits}f}"


def stderr_note(row: dict[str, Any]) -> str:
    """The last lines of a failed side's stderr, on one line."""
    text = " / ".join(line.strip() for line in (row.get("stderr") or "").splitlines()[-4:] if line.strip())
    return f" (stderr: {text[-400:]})" if text else ""


def result_line(stdout: str, tag: str) -> dict[str, Any] | None:
    """The child's last TAG line (the peer's code prints or logs its own lines around it)."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(tag):
            try:
                return json.loads(line[len(tag) :])
            except json.JSONDecodeError:
                return None
    return None


def no_result(done: dict[str, Any], timeout: float, missing: str, stderr_chars: int = 2000) -> dict[str, Any]:
    """A side that printed no result: why (its time limit, or its exit and MISSING), its output's tails."""
    why = f"timed out after {timeout:.0f} s" if done["timed_out"] else f"exit {done['rc']}, {missing}"
    return {"error": why, "stderr": tail(done["stderr"], stderr_chars), "stdout": tail(done["stdout"], 1000)}


# -- processes --------------------------------------------------------------------------------
LIVE: set[int] = set()
"""Process groups of the sides running now: killed with the bench when it is told to stop."""


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_sides(signum: int, frame: Any) -> None:
    """SIGTERM (validate.sh's step limit) or SIGINT: the sides' groups go too, not only this
    process (they run in their own sessions, which `timeout` does not reach)."""
    for pgid in list(LIVE):
        _kill_group(pgid)
    raise SystemExit(128 + signum)


def catch_stop() -> None:
    """SIGTERM and SIGINT to stop_sides."""
    signal.signal(signal.SIGTERM, stop_sides)
    signal.signal(signal.SIGINT, stop_sides)


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


# -- gpuarena's side --------------------------------------------------------------------------
def run_gpuarena(
    problem: Path, solution: Path, mode: str, device: str, timeout: float, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """One `gpuarena run --mode MODE --device DEVICE --json` process, timed from outside; the
    record's figures."""
    cmd = [sys.executable, "-m", "gpuarena", "run", str(problem), str(solution)]
    cmd += ["--mode", mode, "--device", device, "--json"]
    done = run_process(cmd, timeout, env=env)
    row: dict[str, Any] = {"wall_s": done["wall_s"], "rc": done["rc"]}
    try:
        record = json.loads(done["stdout"])
    except json.JSONDecodeError:
        return row | no_result(done, timeout, "no JSON record", stderr_chars=3000)
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


# -- ncu --------------------------------------------------------------------------------------
def ncu_reading(ncu: str, nvtx_range: str, child: list[str], calls: int, timeout: float) -> dict[str, Any]:
    """ncu's gpu__time_duration.sum over each call's kernels (the NVTX range NVTX_RANGE) in the
    CHILD command, which makes CALLS calls; median over calls."""
    cmd = [ncu, "--metrics", NCU_METRIC, "--clock-control", "none", "--cache-control", "all", "--csv"]
    cmd += ["--target-processes", "all", "--nvtx", "--nvtx-include", f"{nvtx_range}/", *child]
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


def profile_calls(call: Callable[..., Any], arguments: list[Any], calls: int, nvtx_range: str) -> None:
    """In the process ncu profiles: three calls outside the ranges (builds and autotuning), then
    CALLS calls, each in its NVTX range and synchronized."""
    import torch

    for _ in range(3):  # builds and autotuning, outside the ranges
        call(*arguments)
    torch.cuda.synchronize()
    for _ in range(calls):
        torch.cuda.nvtx.range_push(nvtx_range)
        call(*arguments)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()


# -- tables and files -------------------------------------------------------------------------
def gpuarena_line(r: dict[str, Any], workload: Callable[[dict[str, Any]], str]) -> str:
    """One gpuarena verdict in the per-problem list; WORKLOAD says one of its workloads."""
    if r.get("error"):
        return f"- gpuarena: wall {r.get('wall_s')} s; ERROR {r['error'][:300]}{stderr_note(r)}"
    return (
        f"- gpuarena: wall {r.get('wall_s')} s (record {r.get('duration_s')} s), {r.get('status')}"
        + (f" {r.get('reason', '')[:200]}" if r.get("status") != "PASSED" else "")
        + f"; phases {json.dumps(r.get('phases'))}; workloads "
        + ", ".join(workload(w) for w in r.get("workloads", []))
    )


def ncu_line(label: str, n: dict[str, Any]) -> str:
    """One ncu reading in the per-problem list."""
    return f"- {label}: {fmt(n.get('us'), 1)} µs, {n.get('kernels_per_call')} kernel(s) a call {n.get('kernels')}" + (
        f"; ERROR {n['error'][:300]}{stderr_note(n)}" if n.get("error") else ""
    )


def write_result(out: Path, stem: str, result: dict[str, Any], md: str) -> None:
    """OUT/STEM.json and OUT/STEM.md, rewritten whole."""
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (out / f"{stem}.md").write_text(md)


def print_report(md: str) -> None:
    """The report, then its tables again: validate.sh keeps the log's tail."""
    table = [line for line in md.splitlines() if line.startswith("|")]
    print(md + "\n" + "\n".join(table), flush=True)
