"""Which threads a solution's import starts, by the kernel's list (/proc/self/task) and by Python's
(threading): the worker rejects a solution whose import leaves a thread, counted from outside
(launch/process.py), and GPU MODE's helion submissions were rejected so on the H200. Run in the
task folder (its task.py, reference.py, utils.py beside submission.py), with the CUDA context made
first as the worker makes it ahead:

    python3 bench/research/import_threads.py [--module submission] [--out FILE]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import threading
import traceback


def tasks() -> dict[str, str]:
    found = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                found[tid] = f.read().strip()
        except OSError:
            pass
    return found


def step(name: str, action, record: list[dict]) -> None:
    before, py_before = tasks(), set(threading.enumerate())
    error = ""
    try:
        action()
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    after = tasks()
    new = {tid: comm for tid, comm in after.items() if tid not in before}
    py_new = [t.name for t in set(threading.enumerate()) - py_before]
    stacks = {}
    for t in set(threading.enumerate()) - py_before:
        frame = sys._current_frames().get(t.ident or -1)
        stacks[t.name] = traceback.format_stack(frame)[-6:] if frame else []
    record.append(
        {"step": name, "new_kernel_threads": new, "new_python_threads": py_new, "stacks": stacks, "error": error}
    )
    print(name, "kernel:", new, "python:", py_new, error, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--module", default="submission")
    parser.add_argument("--out")
    args = parser.parse_args()
    sys.path.insert(0, os.getcwd())
    record: list[dict] = []
    import torch

    step("cuda context", lambda: torch.empty(1, device="cuda").sum().item(), record)
    step("import triton", lambda: importlib.import_module("triton"), record)
    for package in ("helion", "helion.language"):
        step(f"import {package}", lambda package=package: importlib.import_module(package), record)
    step("import task, reference", lambda: [importlib.import_module(m) for m in ("task", "reference")], record)
    step(f"import {args.module}", lambda: importlib.import_module(args.module), record)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main()
