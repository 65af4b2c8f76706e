"""Where a run's timed rounds spend the supervisor's time, piece by piece.

cProfile cannot see through the timed blocks (PyTorch's profiler takes the interpreter's
profile hook over, and the figures around it come out wrong), and run_stacks.py keeps only
the top of each thread's stacks. So this wraps the harness's pieces (the reference's timed
blocks, the worker's requests, the audit's marks and twins, refreshing and checking inputs
and outputs, the stopping rule) with wall-clock counters, runs one `evaluate()` in this
process (after one that builds and caches), and prints each piece's count and seconds
(inclusive: a piece's time holds the pieces it calls). Issue 18: the nine-workload run's
timing and audit phases, 4-6 s each on an H100.

    python3 bench/research/round_costs.py --out costs.json -- level1/softmax examples/softmax/triton.py --device cuda --ncu
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

SECONDS: dict[str, float] = defaultdict(float)
CPU_SECONDS: dict[str, float] = defaultdict(float)
"""The calling thread's CPU time in each piece: far below its wall time, the thread waited (for
the GIL, a core, the kernel), not worked."""
COUNTS: dict[str, int] = defaultdict(int)
WORKER: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
"""Per request type: count, the round trip's wall time, the worker's CPU time in it (all its
threads, and its main thread's), summed."""


def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            SECONDS[name] += time.perf_counter() - started
            CPU_SECONDS[name] += time.thread_time() - cpu
            COUNTS[name] += 1

    return wrapper


CURRENT = {"workload": "?"}
"""The workload being measured (measure_workload's session), for the per-workload pieces."""


def counted_by(key: Callable[..., str], fn: Callable[..., Any]) -> Callable[..., Any]:
    """Counted under a name made from the call's arguments, and again under the workload's."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            name, spent = key(*args, **kwargs), time.perf_counter() - started
            for k in (name, f"{name} @ {CURRENT['workload']}"):
                SECONDS[k] += spent
                COUNTS[k] += 1

    return wrapper


def in_workload(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(supervisor: Any, worker: Any, session: Any, *args: Any, **kwargs: Any) -> Any:
        CURRENT["workload"] = session.workload.name
        return fn(supervisor, worker, session, *args, **kwargs)

    return wrapper


def wrap(owner: Any, attribute: str, name: str | None = None) -> None:
    setattr(
        owner, attribute, counted(name or f"{getattr(owner, '__name__', owner)}.{attribute}", getattr(owner, attribute))
    )


def instrument() -> None:
    from torch.autograd import profiler

    from gpuarena.harness import measure, protocol, rounds_audit, stats, supervisor, twin
    from gpuarena.harness.device import device_audit, timing
    from gpuarena.harness.launch import freeze, process, schedstat

    for attribute in (
        "refresh_sets",
        "check_outputs",
        "converged",
        "compare",
        "commit_checked",
        "summarize",
        "measure_workload",
        "bootstrap_rounds",
    ):
        if hasattr(measure, attribute):
            wrap(measure, attribute, f"measure.{attribute}")
    wrap(stats, "bootstrap_median", "stats.bootstrap_median")
    wrap(timing.Timer, "run_block", "Timer.run_block (supervisor's timed blocks)")
    wrap(profiler.profile, "__enter__", "kineto profile: enter")
    wrap(profiler.profile, "__exit__", "kineto profile: exit")
    wrap(process.WorkerProcess, "request", "WorkerProcess.request (round trip to the worker)")
    asking = process.WorkerProcess.request

    def by_request(self: Any, message: Any, *args: Any, **kwargs: Any) -> Any:
        """The worker's own CPU time per request type, read from outside (its /proc), against the
        round trip's wall time: a worker that works (Python, the driver) or one that waits."""
        try:
            return asking(self, message, *args, **kwargs)
        finally:
            for key in (type(message).__name__, f"{type(message).__name__} @ {CURRENT['workload']}"):
                row = WORKER[key]
                row["count"] += 1
                row["wall_ms"] += (self.last_wall_ns or 0) / 1e6
                row["worker_cpu_ms"] += (self.last_cpu_ns or 0) / 1e6
                row["main_thread_cpu_ms"] += (self.last_main_cpu_ns or 0) / 1e6

    process.WorkerProcess.request = by_request  # type: ignore[method-assign]
    # the round trip's parts on the supervisor's side: what is left is the worker's own time
    wrap(freeze.Freezer, "freeze", "Freezer.freeze (the worker frozen at each reply)")
    wrap(freeze.Freezer, "thaw", "Freezer.thaw")
    wrap(protocol, "send_request", "protocol.send_request")
    import pickle
    import types
    from multiprocessing.connection import Connection

    protocol.pickle = types.SimpleNamespace(  # type: ignore[attr-defined]
        dumps=counted("send_request: pickle.dumps", pickle.dumps),
        loads=pickle.loads,
        HIGHEST_PROTOCOL=pickle.HIGHEST_PROTOCOL,
    )
    wrap(Connection, "send_bytes", "Connection.send_bytes")
    sending = Connection.send_bytes

    def flagged(*args: Any, **kwargs: Any) -> Any:
        queued(args[0])
        IN_SEND["on"] = True
        try:
            return sending(*args, **kwargs)
        finally:
            IN_SEND["on"] = False

    Connection.send_bytes = flagged  # type: ignore[method-assign]
    wrap(protocol, "receive_reply", "protocol.receive_reply (the worker's time and the reply's transit)")
    wrap(process.WorkerProcess, "check_idle", "WorkerProcess.check_idle")
    wrap(process.WorkerProcess, "cpu_ns", "WorkerProcess.cpu_ns")
    wrap(schedstat, "main_thread", "schedstat.main_thread")
    for attribute in ("mark", "start", "stop", "idle", "segment"):
        wrap(device_audit.DeviceSampler, attribute, f"DeviceSampler.{attribute}")
    wrap(twin.ReferenceTwin, "block", "ReferenceTwin.block")
    for attribute in ("begin", "solution", "reference", "twins", "finish", "_sample", "_wait_quiet", "unswept"):
        wrap(rounds_audit.RoundsAudit, attribute, f"RoundsAudit.{attribute}")
    # the audit by what each sampled block holds, and by workload: where its seconds go
    audit = rounds_audit.RoundsAudit
    audit._sample = counted_by(lambda self, name: f"audit block: {name}", audit._sample)  # type: ignore[method-assign]
    audit._segment = counted_by(lambda self, work, what: f"audit segment: {what}", audit._segment)  # type: ignore[method-assign]
    for attribute in ("begin", "finish", "unswept"):
        setattr(audit, attribute, counted_by(lambda self, *a, _n=attribute: f"audit.{_n}", getattr(audit, attribute)))
    measure.measure_workload = in_workload(measure.measure_workload)
    supervisor.measure_workload = measure.measure_workload  # imported there by name
    for attribute in ("_check_correctness", "_kernel_durations", "_workload", "_precision", "_start_up"):
        if hasattr(supervisor.Supervisor, attribute):
            wrap(supervisor.Supervisor, attribute, f"Supervisor.{attribute}")
    # the correctness phase and the run's end, piece by piece (issue 47: 0.45-0.55 s and 0.2 s of a
    # cold ranked vectoradd on an H200)
    from gpuarena.harness import correctness, held_memory, memory_plan, precision, transport
    from gpuarena.harness.device import environment
    from gpuarena.harness.launch import cgroup, started

    supervisor.Supervisor._workload = counted_by(  # type: ignore[method-assign]
        lambda self, worker, arena, workload, method: f"Supervisor._workload: {workload.name}",
        _naming(supervisor.Supervisor._workload),
    )
    supervisor.check_correctness = counted("correctness.check_correctness", correctness.check_correctness)
    held_memory.draw_workload = counted("held_memory.draw_workload", held_memory.draw_workload)
    wrap(memory_plan, "draw_and_allocate", "memory_plan.draw_and_allocate")
    wrap(correctness, "_precision", "correctness._precision (float64)")
    wrap(correctness, "compare", "correctness.compare")
    from gpuarena.harness import session as session_module

    for attribute in ("make", "reference", "fill", "sync"):
        wrap(session_module.WorkloadSession, attribute, f"WorkloadSession.{attribute}")
    for attribute in dir(precision):
        if not attribute.startswith("_") and callable(getattr(precision, attribute)) and attribute[0].islower():
            if getattr(getattr(precision, attribute), "__module__", "") == precision.__name__:
                wrap(precision, attribute, f"precision.{attribute}")
    for attribute in ("stop", "close", "_reap"):
        wrap(process.WorkerProcess, attribute, f"WorkerProcess.{attribute}")
    wrap(cgroup.Cgroup, "remove", "Cgroup.remove")
    wrap(started.StartedWorker, "close", "StartedWorker.close")
    wrap(environment, "gpu_state", "environment.gpu_state (nvidia-smi)")
    wrap(transport.SharedArena, "close", "SharedArena.close")
    wrap(device_audit.DeviceSampler, "close", "DeviceSampler.close")


def _naming(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The workload's name as the current one from its first piece (the correctness phase too)."""

    @functools.wraps(fn)
    def wrapper(self: Any, worker: Any, arena: Any, workload: Any, *args: Any, **kwargs: Any) -> Any:
        CURRENT["workload"] = workload.name
        return fn(self, worker, arena, workload, *args, **kwargs)

    return wrapper


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each thread of this process, by name and id: a thread
    that spins holds the interpreter from the main thread's requests."""
    tick = os.sysconf("SC_CLK_TCK")
    found: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            name = Path(f"/proc/self/task/{tid}/comm").read_text().strip()
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found[f"{name} ({tid})"] = (int(fields[11]) + int(fields[12])) / tick
    return found


IN_SEND = {"on": False}
KERNEL_WAITS: dict[str, int] = defaultdict(int)
"""Where in the kernel the main thread was, sampled while it sends a request (--wchan)."""


def watch_sends(main_tid: int) -> None:
    """Sample the main thread's kernel stack (else its wchan) every 0.2 ms while it is in send_bytes."""
    import threading

    def run() -> None:
        stack, wchan = Path(f"/proc/self/task/{main_tid}/stack"), Path(f"/proc/self/task/{main_tid}/wchan")
        while True:
            if IN_SEND["on"]:
                try:
                    frames = [line.split()[-1] for line in stack.read_text().splitlines()[:6]]
                    where = " < ".join(f.split("+")[0] for f in frames) or "(running)"
                except OSError:
                    try:
                        where = wchan.read_text().strip() or "(running)"
                    except OSError as exc:
                        where = f"unreadable: {exc}"
                KERNEL_WAITS[where] += 1
            time.sleep(0.0002)

    threading.Thread(target=run, name="round-costs-wchan", daemon=True).start()


SEND_QUEUE: list[int] = []
"""Bytes in the supervisor's socket's send queue (sent, not yet freed by the reader: TIOCOUTQ) before each send."""
SEND_BUFFER: set[int] = set()


def queued(conn: Any) -> None:
    import array
    import fcntl
    import socket
    import termios

    try:
        found = array.array("i", [0])
        fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, found)
        SEND_QUEUE.append(found[0])
        borrowed = socket.socket(fileno=conn.fileno())
        try:
            SEND_BUFFER.add(borrowed.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF))
        finally:
            borrowed.detach()  # the connection's descriptor, not ours to close
    except (OSError, ValueError):
        pass


def scheduling() -> dict[str, float]:
    """This thread's time on a core and waiting for one (the guest's scheduler: schedstat), and the
    machine's steal time (a virtual machine's vCPUs descheduled by its host: /proc/stat), in s."""
    found: dict[str, float] = {}
    try:
        on_cpu, waited, _ = Path("/proc/thread-self/schedstat").read_text().split()
        found |= {"on_cpu_s": int(on_cpu) / 1e9, "run_delay_s": int(waited) / 1e9}
        cpu = Path("/proc/stat").read_text().splitlines()[0].split()
        found["steal_s"] = int(cpu[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--switch-interval", type=float, default=None, help="sys.setswitchinterval for the run (GIL hand-over, s)"
    )
    parser.add_argument("--wchan", action="store_true", help="sample where in the kernel each send waits")
    parser.add_argument("--mode", default="benchmark", help="the run's mode (benchmark, ranked)")
    parser.add_argument("run", nargs=argparse.REMAINDER, help="-- PROBLEM SOLUTION [--device D] [--workload W] [--ncu]")
    args = parser.parse_args()
    run = [a for a in args.run if a != "--"]
    problem, solution, rest = run[0], run[1], run[2:]
    device = rest[rest.index("--device") + 1] if "--device" in rest else "cuda"
    workloads = [rest[i + 1] for i, a in enumerate(rest) if a == "--workload"] or None

    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    loaded_problem, loaded_solution = resolve_problem(problem), load_solution(Path(solution))
    options = RunOptions(
        device=device,
        mode=args.mode,
        timeout_s=600,
        workloads=workloads,
        kernel_duration=True if "--ncu" in rest else None,
    )
    evaluate(loaded_problem, loaded_solution, options)  # builds and caches, as a contestant's second run finds them
    instrument()
    if args.wchan:
        import threading

        watch_sends(threading.get_native_id())
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    threads_before, scheduled_before = thread_cpu(), scheduling()
    started = time.perf_counter()
    record = evaluate(loaded_problem, loaded_solution, options)
    wall = time.perf_counter() - started
    scheduled = {k: round(v - scheduled_before.get(k, 0.0), 3) for k, v in scheduling().items()}
    threads = {
        name: round(seconds - threads_before.get(name, 0.0), 3)
        for name, seconds in sorted(thread_cpu().items(), key=lambda kv: -kv[1])
    }
    pieces = sorted(
        (
            {
                "piece": k,
                "count": COUNTS[k],
                "seconds": round(v, 3),
                "cpu_s": round(CPU_SECONDS[k], 3) if k in CPU_SECONDS else None,
                "ms_each": round(1e3 * v / max(COUNTS[k], 1), 2),
            }
            for k, v in SECONDS.items()
        ),
        key=lambda p: -p["seconds"],
    )
    result = {
        "command": " ".join(sys.argv),
        "wall_s": round(wall, 3),
        "status": record.status.value,
        "duration_s": record.duration_s,
        "phases": record.phases,
        "workloads": [
            {
                "name": w.name,
                "samples": w.time.samples if w.time else None,
                "audit_requests": len(w.device_audit.observed_us_per_request or []) if w.device_audit else None,
                "audit_s": w.device_audit.seconds if w.device_audit else None,
                "unswept": len(w.device_audit.unswept_per_request) if w.device_audit else None,
            }
            for w in record.workloads
        ],
        "pieces": pieces,
        "worker_requests": {k: {m: round(v, 3) for m, v in row.items()} for k, row in WORKER.items()},
        "thread_cpu_s": threads,
        "main_thread_scheduling_s": scheduled,
        "send_queue_bytes": {
            "max": max(SEND_QUEUE, default=None),
            "median": sorted(SEND_QUEUE)[len(SEND_QUEUE) // 2] if SEND_QUEUE else None,
            "send_buffer": sorted(SEND_BUFFER),
        },
        "kernel_waits_in_send": dict(sorted(KERNEL_WAITS.items(), key=lambda kv: -kv[1])[:12]),
        "affinity": sorted(os.sched_getaffinity(0)),
    }
    for p in pieces:
        cpu = "" if p["cpu_s"] is None else f" (cpu {p['cpu_s']:.3f} s)"
        print(f"{p['seconds']:8.3f} s {p['count']:6d} x {p['ms_each']:8.2f} ms  {p['piece']}{cpu}")
    print(json.dumps({k: v for k, v in result.items() if k != "pieces"}))
    print("CPU seconds per thread of this process over the run:", json.dumps(threads))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
