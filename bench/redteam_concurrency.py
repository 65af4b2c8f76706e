"""The honest red-team cases judged three at a time on one machine: no honest case may be
REJECTED (or fail otherwise) because its neighbours load the CPU, and the forged-timing cases
must still be caught under the same load (issue 16).

Usage: python3 bench/redteam_concurrency.py [--device cpu] [--parallel 3] [--repeat 1]
                                            [--json PATH] [--corpus redteam (the shipped corpus)]
Exit status 0 when every case got an expected verdict in every repetition.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

FORGED = ("patched_reply_function", "patched_device_time_only", "module_clock_ticks", "timer_method_replaced")
"""Exploits that forge times: run alongside, they must still be rejected."""


def _judge(path: str, device: str) -> dict:
    """One case in a process of its own (its own TMPDIR for the leak records)."""
    os.environ["TMPDIR"] = tempfile.mkdtemp(prefix="gpuarena-concurrency-")
    from gpuarena.redteam import load_cases, run_case

    (case,) = [
        c
        for c in load_cases(Path(path).parents[1] if "honest" in Path(path).parts else Path(path).parents[2])
        if str(c.path) == path
    ]
    started = time.monotonic()
    outcome = run_case(case, device)
    return {
        "case": case.name,
        "family": case.family,
        "expect": case.expect,
        "got": outcome.got,
        "ok": outcome.ok,
        "reason": outcome.reason[:300],
        "score": outcome.details.get("score"),
        "seconds": round(time.monotonic() - started, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--parallel", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--corpus", default=None, help="folder of cases (default: the shipped corpus)")
    args = parser.parse_args()
    from gpuarena.bundled import bundled_redteam
    from gpuarena.redteam import load_cases

    cases = [
        c
        for c in load_cases((Path(args.corpus) if args.corpus else bundled_redteam()).resolve())
        if args.device in c.devices and (c.honest or c.name in FORGED)
    ]
    results = []
    started = time.monotonic()
    for repetition in range(args.repeat):
        with ProcessPoolExecutor(max_workers=args.parallel) as pool:
            futures = [pool.submit(_judge, str(c.path), args.device) for c in cases]
            for future in as_completed(futures):
                row = {**future.result(), "repetition": repetition + 1}
                results.append(row)
                mark = "ok " if row["ok"] else "BAD"
                print(
                    f"[{len(results):3d}/{len(cases) * args.repeat}] {mark} {row['seconds']:5.1f}s {row['case']}: "
                    f"expected {'|'.join(row['expect'])}, got {row['got']} {row['reason'][:120]}",
                    flush=True,
                )
    bad = [r for r in results if not r["ok"]]
    summary = {
        "device": args.device,
        "parallel": args.parallel,
        "repeat": args.repeat,
        "cases": len(cases),
        "judged": len(results),
        "unexpected": len(bad),
        "seconds": round(time.monotonic() - started, 1),
        "cores": os.cpu_count(),
        "machine": platform.node() and "this machine",
        "python": sys.version.split()[0],
    }
    print(json.dumps(summary))
    if args.json_path:
        Path(args.json_path).write_text(json.dumps({"summary": summary, "results": results}, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
