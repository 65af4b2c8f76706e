"""Running the importers for bench/peer_material.py: each item's `gpuarena import ...` in a process
of its own, with a time limit, a memory cap, its share of the cores and, on a machine of several
GPUs, one GPU (the one running the fewest imports when it starts)."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from peer_material_report import Item
from peer_refusals import BUDGET_SPENT, IMPORTED, REFUSED, TIMEOUT, classify, parse_output


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "item"


def import_command(item: Item, work: Path, device: str, python: str = sys.executable) -> list[str]:
    """The `gpuarena import ...` command line that imports the item under work/."""
    gpuarena = [python, "-m", "gpuarena", "import"]
    if item.peer == "kernelbench":
        return [*gpuarena, "kernelbench", item.source, "-o", str(work / "kernelbench"), "--check-device", device]
    if item.peer == "gpumode":
        out = work / "gpumode" / _slug(item.group)
        return [*gpuarena, "gpumode", item.source, "-o", str(out), "--check-device", device]
    if item.peer == "flashinfer-definition":
        out = work / "flashinfer" / _slug(item.extra["definition"])
        return [
            *gpuarena,
            "flashinfer",
            item.source,
            "-w",
            item.extra["workloads"],
            "-o",
            str(out),
            "--check-device",
            device,
        ]
    if item.peer == "flashinfer-solution":
        problem = work / "flashinfer" / _slug(item.extra["definition"])
        out = work / "flashinfer-solutions" / _slug(item.name.removesuffix(".json"))
        return [*gpuarena, "flashinfer-solution", item.source, "--problem", str(problem), "-o", str(out)]
    raise ValueError(f"unknown material {item.peer!r}")


def _memory_limit(gigabytes: float | None) -> list[str]:
    """The prefix that caps an import's address space (prlimit, where util-linux has it)."""
    if not gigabytes or shutil.which("prlimit") is None:
        return []
    return ["prlimit", f"--as={int(gigabytes * 2**30)}", "--"]


class GpuSlots:
    """Which GPU the next import gets: the one running the fewest imports now (CUDA_VISIBLE_DEVICES
    of the import's process), so a machine of several GPUs shares the material out among them."""

    def __init__(self, count: int):
        self.running = [0] * max(1, count)
        self.lock = threading.Lock()

    def take(self) -> int:
        with self.lock:
            gpu = min(range(len(self.running)), key=lambda g: self.running[g])
            self.running[gpu] += 1
            return gpu

    def give(self, gpu: int) -> None:
        with self.lock:
            self.running[gpu] -= 1


def run_item(
    item: Item,
    work: Path,
    device: str,
    timeout: float,
    memory_gb: float | None = None,
    gpu: int | None = None,
    threads: int | None = None,
) -> Item:
    """Run the item's import in a process (group) of its own, killed at `timeout` seconds, its
    address space capped at memory_gb (so one huge import fails alone, not the machine), on GPU
    `gpu` alone where one is given, with `threads` CPU threads for its ops where given."""
    item.command = import_command(item, work, device)
    env = {**os.environ, "COLUMNS": "400"}
    if threads is not None:  # imports at once share the cores: spinning OpenMP threads of each starve all
        env["OMP_NUM_THREADS"] = str(threads)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
        item.extra["gpu"] = str(gpu)
    started = time.perf_counter()
    process = subprocess.Popen(
        _memory_limit(memory_gb) + item.command,
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # the whole group is killed at the time limit
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        item.seconds = round(time.perf_counter() - started, 1)
        item.rc, item.outcome, item.category = None, REFUSED, TIMEOUT
        item.messages = [f"not done in {timeout:g} s"]
        return item
    item.seconds = round(time.perf_counter() - started, 1)
    item.rc = process.returncode
    item.outcome, item.messages = parse_output(item.peer, process.returncode, output)
    if process.returncode < 0:  # killed (the kernel's OOM killer, say): no words of its own
        item.outcome, item.category = REFUSED, f"killed by {signal.Signals(-process.returncode).name}"
        item.messages.append(output[-2000:])
    elif item.outcome == REFUSED:
        item.category = classify(item.messages)
    return item


def not_run(item: Item, category: str, message: str) -> Item:
    item.outcome, item.category, item.messages = REFUSED, category, [message]
    return item


def run_all(
    items: list[Item],
    work: Path,
    device: str,
    timeout: float,
    jobs: int,
    say: Callable[[str], None],
    memory_gb: float | None = None,
    deadline: float | None = None,
    gpus: int = 0,
) -> None:
    """Import every item, `jobs` at a time (shared out among `gpus` GPUs where given), saying each
    outcome as it comes; an item not started by `deadline` (a time.monotonic() value) is not run,
    and says so. With GPUs, an import that ran out of memory while others shared its GPU is run
    again at the end, alone on its GPU: what another import held is not the file's property."""
    lock = threading.Lock()
    done = itertools.count(1)
    slots = GpuSlots(gpus) if gpus else None
    threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else None

    def one(item: Item) -> None:
        if deadline is not None and time.monotonic() > deadline:
            not_run(item, BUDGET_SPENT, "not started: the run's --budget was spent")
        elif slots is None:
            run_item(item, work, device, timeout, memory_gb, threads=threads)
        else:
            gpu = slots.take()
            try:
                run_item(item, work, device, timeout, memory_gb, gpu, threads)
            finally:
                slots.give(gpu)
        with lock:
            what = item.outcome if item.outcome == IMPORTED else f"{item.outcome}: {item.category}"
            say(f"[{next(done)}/{len(items)}] {item.peer} {item.name}: {what} ({item.seconds:g} s)")

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, items))
    spent = deadline is not None and time.monotonic() > deadline
    again = [i for i in items if gpus and jobs > gpus and not spent and _out_of_device_memory(i)]
    for item in again:
        item.extra["retried"] = f"alone on its GPU, after {item.category} beside other imports"
    if again:
        say(f"{len(again)} import(s) out of memory beside others: again, one per GPU")
        run_all(again, work, device, timeout, gpus, say, memory_gb, deadline, gpus)


def _out_of_device_memory(item: Item) -> bool:
    return item.outcome == REFUSED and any(
        "out of memory" in m.lower() or "OutOfMemoryError" in m for m in [item.category, *item.messages]
    )


def run_flashinfer(
    definitions: list[Item],
    solutions: list[Item],
    work: Path,
    device: str,
    timeout: float,
    jobs: int,
    say: Callable[[str], None],
    memory_gb: float | None = None,
    deadline: float | None = None,
) -> None:
    """Definitions with workloads first; then each solution whose definition was imported."""
    for item in definitions:
        if "workloads" not in item.extra:
            not_run(item, "no workloads in the material", "no workloads/**/*.jsonl names this definition")
    run_all([d for d in definitions if "workloads" in d.extra], work, device, timeout, jobs, say, memory_gb, deadline)
    by_name = {d.extra["definition"]: d for d in definitions}
    runnable = []
    for item in solutions:
        definition = by_name.get(item.extra["definition"])
        if definition is None:
            not_run(item, "its definition is not in the material", f"names definition {item.extra['definition']!r}")
        elif definition.outcome != IMPORTED:
            not_run(item, "its definition was not imported", f"{definition.name}: {definition.category}")
        else:
            runnable.append(item)
    run_all(runnable, work, device, timeout, jobs, say, memory_gb, deadline)
