"""Where a GPU MODE task's own pieces spend their time, entry by entry, outside any harness: its
`generate_input`, `ref_kernel`, a submission's `custom_kernel` and its `check_implementation`,
each timed alone (the device synchronized before and after). gpuarena's verdicts on
linalg/eigh_py ran past 300 s on an H200 in test mode (one draw, one reference call, one
submission call and one check a workload), where GPU MODE's test checks each test once; this says
which of the task's pieces those seconds are, so the harness's share can be told from the task's.

    python bench/research/task_entry_costs.py .gpu/reference-kernels/problems/linalg/eigh_py \
        --submission submissions/torch_eigh.py --out r.json [--only benchmarks] [--limit 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from gpuarena.interop.gpumode_task import _cases, _verdict, read_task_yml


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(work: Callable[[], Any]) -> tuple[Any, float]:
    """work()'s result and its seconds, the device idle at both ends."""
    _sync()
    started = time.perf_counter()
    result = work()
    _sync()
    return result, time.perf_counter() - started


def _module(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def entries(task: Path, only: str) -> list[tuple[str, dict[str, Any]]]:
    """task.yml's tests and benchmarks (or only one kind), read and named as gpuarena's importer
    reads and names them (its workload names), each with generate_input's arguments, seed included."""
    path = task / "task.yml"
    kinds = {"all": ("test", "bench"), "tests": ("test",), "benchmarks": ("bench",)}[only]
    return [(c.name, {**c.args, "seed": c.seed}) for c in _cases(read_task_yml(path), path) if c.kind in kinds]


def costs(task: Path, submission: Path, only: str, limit: int | None) -> list[dict[str, Any]]:
    sys.path[:0] = [str(task), str(task.parent)]  # task.py and utils.py, as GPU MODE's eval has them
    reference = _module("reference", task / "reference.py")
    solution = _module("submission", submission)
    rows = []
    for name, entry in entries(task, only)[:limit]:
        data, draw_s = timed(lambda entry=entry: reference.generate_input(**entry))
        _, ref_s = timed(lambda data=data: reference.ref_kernel(data))
        output, call_s = timed(lambda data=data: solution.custom_kernel(data))
        verdict, check_s = timed(lambda data=data, output=output: reference.check_implementation(data, output))
        ok = _verdict(verdict)[0]  # check_implementation's answer, read as the importer reads it
        seconds = {"generate_input_s": draw_s, "ref_kernel_s": ref_s, "custom_kernel_s": call_s, "check_s": check_s}
        rows.append({"entry": name, "args": entry, **{k: round(v, 4) for k, v in seconds.items()}, "passed": ok})
        print(
            f"{name[:40]:40} draw {draw_s:8.3f} s  ref {ref_s:8.3f} s  call {call_s:8.3f} s  check {check_s:8.3f} s"
            f"  {'ok' if ok else 'REJECTED'}  {entry}",
            flush=True,
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("--submission", type=Path, default=Path("submission.py"), help="relative to the task")
    parser.add_argument("--only", choices=["all", "tests", "benchmarks"], default="all")
    parser.add_argument("--limit", type=int, default=None, help="the first N entries only")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    task = args.task.resolve()
    submission = args.submission if args.submission.is_absolute() else task / args.submission
    started = time.perf_counter()
    rows = costs(task, submission, args.only, args.limit)
    keys = ("generate_input_s", "ref_kernel_s", "custom_kernel_s", "check_s")
    sums = {key: round(sum(r[key] for r in rows), 3) for key in keys}
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    print(f"{len(rows)} entries on {device}: " + ", ".join(f"{k} {v}" for k, v in sums.items()))
    record = {
        "command": " ".join(sys.argv),
        "device": device,
        "task": task.name,
        "submission": str(args.submission),
        "seconds": round(time.perf_counter() - started, 3),
        "sums_s": sums,
        "entries": rows,
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
