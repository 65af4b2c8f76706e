"""A suite run spread over several devices of one host: one process per device slot (a GPU pinned
with CUDA_VISIBLE_DEVICES, as the runner pins its slots), each timing its share of the problems
through its own evaluator, one problem at a time as a single-device run does; the parent merges
what they time, in the problems' order. Each GPU still times one problem at a time alone, so a
problem's time does not depend on how many GPUs shared the run.

The child is `python -m gpuarena.suite.shard`: its job (problems, framework, device, budget) comes
as JSON on stdin, and it answers one JSON line per event on stdout."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuarena.errors import GpuarenaError
from gpuarena.problems.loader import Problem, load_problem
from gpuarena.suite.model import ProblemTime, SuiteResult
from gpuarena.suite.run import left_out_of, result_of, run_suite


def gpu_slots(count: int) -> list[dict[str, str]]:
    """The environments of `count` processes, one GPU each (0: every visible GPU): the GPUs a
    set CUDA_VISIBLE_DEVICES lists (indexes or UUIDs), else those the runner finds, pinned as the
    runner pins its slots (contracts/device.py)."""
    from gpuarena.contracts.device import pinning
    from gpuarena.host_devices import detect

    if count < 0:
        raise GpuarenaError(f"--gpus {count}: give a number of GPUs, or 0 for every visible one")
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        slots = [{"CUDA_VISIBLE_DEVICES": g.strip()} for g in listed.split(",") if g.strip()]
    else:
        slots = [pinning(slot)[1] for slot in detect(cpu=False)]
    if not slots:
        raise GpuarenaError("--gpus: no CUDA device is visible here")
    if count > len(slots):
        shown = ", ".join(slot["CUDA_VISIBLE_DEVICES"] for slot in slots)
        raise GpuarenaError(f"--gpus {count}: only {len(slots)} GPU(s) visible here ({shown})")
    return slots[: count or len(slots)]


def split(problems: list[Problem], n: int) -> list[list[Problem]]:
    """Every n-th problem to each slot, so each gets a share of every level and model."""
    return [problems[i::n] for i in range(n)]


def _root(problem: Problem) -> Path:
    """The folder the problem's id is relative to (level1/softmax under problems/)."""
    return problem.path.parents[problem.id.count("/")]


def run_sharded(
    problems: list[Problem],
    framework: str,
    device: str,
    budget_s: float,
    slots: list[dict[str, str]],
    progress: Callable[[str], None] = lambda text: None,
    checkpoint: Callable[[SuiteResult], None] = lambda result: None,
    time_limit_s: float | None = None,
) -> SuiteResult:
    """Time the problems on len(slots) processes at once (each slot: environment variables for its
    child). A child that dies leaves its remaining problems with status ERROR and the reason,
    never silently out."""
    order = {p.id: i for i, p in enumerate(problems)}
    if len(order) != len(problems):
        raise GpuarenaError("two chosen problems share an id: run them in separate suite runs")
    left_out = left_out_of(problems, framework, device)  # the children leave the same out
    events: queue.Queue[tuple[int, dict[str, Any] | None]] = queue.Queue()
    children, shares = [], split(problems, len(slots))
    for k, (slot, share) in enumerate(zip(slots, shares)):
        if not share:
            continue
        child = subprocess.Popen(
            [sys.executable, "-m", "gpuarena.suite.shard"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **slot},
        )
        job = {
            "framework": framework,
            "device": device,
            "budget_s": budget_s,
            "time_limit_s": time_limit_s,
            "problems": [{"folder": str(p.path), "root": str(_root(p))} for p in share],
        }
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(json.dumps(job))
            child.stdin.close()
        except BrokenPipeError:  # it died before reading its job: its exit code says so below
            pass
        threading.Thread(target=_pump, args=(k, child.stdout, events), daemon=True).start()
        children.append((k, child, share))
    times: dict[str, ProblemTime] = {}
    names: set[str] = set()
    running = len(children)
    while running:
        k, event = events.get()
        if event is None:
            running -= 1
            continue
        if "progress" in event:
            progress(f"[slot {k}] {event['progress']}")
        if "time" in event:
            done = ProblemTime.model_validate(event["time"])
            times[done.problem] = done
            if event.get("device_name"):
                names.add(str(event["device_name"]))
            checkpoint(result_of(framework, device, _name(names), _ordered(times, order), left_out))
    for k, child, share in children:
        code = child.wait()
        for problem in share:
            if problem.id not in times and problem.id not in left_out and code != 0:
                times[problem.id] = ProblemTime(
                    problem=problem.id,
                    level=problem.spec.level,
                    weight=problem.spec.weight,
                    tags=problem.spec.tags,
                    status="ERROR",
                    reason=f"the suite's process for slot {k} exited with code {code}",
                )
    return result_of(framework, device, _name(names), _ordered(times, order), left_out)


def _ordered(times: dict[str, ProblemTime], order: dict[str, int]) -> list[ProblemTime]:
    return sorted(times.values(), key=lambda t: order[t.problem])


def _name(names: set[str]) -> str:
    return " + ".join(sorted(names))


def _pump(k: int, stream: Any, events: queue.Queue[tuple[int, dict[str, Any] | None]]) -> None:
    """Each JSON line the child writes, as an event; a line that is not one is shown as progress."""
    for line in stream:
        line = line.strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            event = {"progress": line}
        events.put((k, event if isinstance(event, dict) else {"progress": line}))
    events.put((k, None))


def _child() -> None:
    """The child's side: time the job's problems, one event line each."""
    job = json.loads(sys.stdin.read())
    problems = [load_problem(p["folder"], root=Path(p["root"])) for p in job["problems"]]

    events, sys.stdout = sys.stdout, sys.stderr  # the harness's own output to stderr: stdout carries events

    def say(event: dict[str, Any]) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    def done(so_far: SuiteResult) -> None:
        say({"time": so_far.problems[-1].model_dump(mode="json"), "device_name": so_far.device_name})

    run_suite(
        problems,
        job["framework"],
        job["device"],
        job["budget_s"],
        progress=lambda text: say({"progress": text}),
        checkpoint=done,
        time_limit_s=job.get("time_limit_s"),
    )


if __name__ == "__main__":
    _child()
