"""The red-team corpus, one line per case as it finishes (what `gpuarena redteam` does, through
the same `run_case`, but streamed: a run cut short by a time limit still shows every case it
judged). For the GPU machine, where one call has a wall-clock limit.

Usage: python3 bench/redteam_stream.py [--device cuda] [--family TEXT] [--gpu-only]
                                       [--json PATH] [--corpus redteam (the shipped corpus)] [--shard K/N]
                                       [--cases NAME,NAME]
--gpu-only: only the cases that apply to CUDA alone (DEVICES = ["cuda"]).
--shard K/N: every Nth case from the Kth, for parallel runs (give each its own TMPDIR: the
record of leaked processes lives there).
Exit status 0 when every case got an expected verdict.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--family", default=None)
    parser.add_argument("--gpu-only", action="store_true")
    parser.add_argument("--json", dest="json_path", default=None)
    parser.add_argument("--corpus", default=None, help="folder of cases (default: the shipped corpus)")
    parser.add_argument("--cases", default=None, help="comma-separated case names: only these")
    parser.add_argument("--shard", default="0/1", help="K/N: every Nth case from the Kth, K from 0 (parallel runs)")
    args = parser.parse_args()

    from gpuarena.bundled import bundled_redteam
    from gpuarena.redteam import load_cases, run_case

    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    cases = [
        c
        for c in load_cases(Path(args.corpus) if args.corpus else bundled_redteam())
        if kind in c.devices
        and (not args.family or args.family in c.family)
        and (not args.gpu_only or "cpu" not in c.devices)
        and (not args.cases or c.name in args.cases.split(","))
    ]
    k, n = (int(v) for v in args.shard.split("/"))
    if not 0 <= k < n:  # 2/2 once ran every second case from case 2: case 0 was never run
        parser.error(f"--shard {args.shard}: K counts from 0 and must be below N (0/{n} .. {n - 1}/{n})")
    cases = cases[k::n]
    print(f"{len(cases)} cases on {args.device} (shard {k}/{n})", flush=True)
    rows, started = [], time.monotonic()
    for i, case in enumerate(cases):
        t0 = time.monotonic()
        try:
            outcome = run_case(case, args.device)
            got, reason, ok, audits = outcome.got, outcome.reason, outcome.ok, outcome.details.get("device_audits")
        except Exception as exc:  # a harness crash is a finding too
            got, reason, ok, audits = "CRASH", f"{type(exc).__name__}: {exc}", False, None
        took = time.monotonic() - t0
        rows.append(
            {
                "family": case.family,
                "case": case.name,
                "expected": case.expect,
                "got": got,
                "ok": ok,
                "seconds": round(took, 1),
                "reason": reason,
                "device_audits": audits or [],
            }
        )
        print(
            f"[{i + 1:3d}/{len(cases)}] {'ok ' if ok else 'BAD'} {took:5.1f}s {case.family}: {case.name}: "
            f"expected {'|'.join(case.expect)}, got {got}: {reason[:200]}",
            flush=True,
        )
        for a in audits or []:
            print(
                f"      audit: claimed {a.get('claimed_us')} observed {a.get('observed_us_per_call')} "
                f"noise {a.get('noise_us')} inflation {a.get('inflation_us', 0.0)} "
                f"per request {a.get('observed_us_per_request')}",
                flush=True,
            )
        if args.json_path:
            Path(args.json_path).write_text(json.dumps(rows, indent=1))
    bad = [r for r in rows if not r["ok"]]
    print(
        f"{len(rows) - len(bad)} of {len(rows)} cases as expected on {args.device} "
        f"({time.monotonic() - started:.0f} s)",
        flush=True,
    )
    for r in bad:
        print(
            f"  UNEXPECTED {r['family']}: {r['case']}: expected {'|'.join(r['expected'])}, got {r['got']}: "
            f"{r['reason'][:400]}",
            flush=True,
        )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
