"""Does judging a small kernel on more calls a request let a forged claim pass more often?

Stop 41 (docs/harness.md, "The rounds piece by piece") measured 64 input sets where a set is
under 1 MiB, instead of 16: the 64 x 1000 softmax's audit then took 12 sampled requests
rather than 13-60, and all nine softmax workloads with --ncu 14.4-15.0 s on an H100; but in
the CUDA corpus on that code `fake_results/patched_reply_function` (1.5 µs claimed for a
4.5 µs kernel) PASSED once, as it has before with 16 sets. This runs that exploit and an
honest small solution N times each way, alternating, in this process (the supervisor's
`count_sets` patched for the 64-set way), and prints each verdict with the audit's figures.
The change is worth keeping only if the exploit is rejected at least as often with 64 sets.

    python3 bench/research/small_sets_ab.py --n 6 --out small-sets-ab.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = {
    "forged": ROOT / "redteam/exploits/fake_results/patched_reply_function.py",
    "honest": ROOT / "examples/softmax/triton.py",
}
SMALL_SET_BYTES = 1 << 20
SMALL_SETS = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=6, help="runs of each case each way")
    parser.add_argument("--workload", default="small-64x1000")
    parser.add_argument("--device", default="cuda", help="cpu runs the flow without the audit (a check of the script)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    import gpuarena.solution_readers  # noqa: F401  (registers every format's reader)
    from gpuarena.harness import supervisor
    from gpuarena.harness.judge import RunOptions, evaluate
    from gpuarena.problems import resolve_problem
    from gpuarena.solutions import load_solution

    shipped = supervisor.count_sets

    def many_small(budget, set_bytes: int) -> int:
        return (
            min(SMALL_SETS, budget.bytes // max(set_bytes, 1))
            if set_bytes <= SMALL_SET_BYTES
            else shipped(budget, set_bytes)
        )

    if args.device == "cpu":
        CASES["honest"] = ROOT / "examples/softmax/pytorch.py"
    problem = resolve_problem("level1/softmax")
    options = RunOptions(device=args.device, mode="benchmark", timeout_s=600, workloads=[args.workload])
    runs = []
    for i in range(args.n):
        for way, count in (("16 sets", shipped), ("64 sets", many_small)):
            supervisor.count_sets = count
            for case, path in CASES.items():
                started = time.perf_counter()
                record = evaluate(problem, load_solution(path), options)
                w = record.workloads[0]
                audit = w.device_audit
                run = {
                    "i": i,
                    "way": way,
                    "case": case,
                    "status": record.status.value,
                    "wall_s": round(time.perf_counter() - started, 2),
                    "calls_per_request": w.time.samples // max(len(audit.observed_us_per_request or []), 1)
                    if w.time and audit
                    else None,
                    "requests": len(audit.observed_us_per_request or []) if audit else None,
                    "claimed_us": audit.claimed_us if audit else None,
                    "observed_us": round(audit.observed_us_per_call, 3)
                    if audit and audit.observed_us_per_call
                    else None,
                    "noise_us": round(audit.noise_us, 3) if audit and audit.noise_us else None,
                    "reason": record.reason[:200],
                }
                runs.append(run)
                print(json.dumps(run), flush=True)
    supervisor.count_sets = shipped
    summary = {}
    for way in ("16 sets", "64 sets"):
        for case in CASES:
            mine = [r for r in runs if r["way"] == way and r["case"] == case]
            summary[f"{case}, {way}"] = {
                "rejected": sum(r["status"] == "REJECTED" for r in mine),
                "runs": len(mine),
                "median_observed_us": statistics.median(r["observed_us"] or 0 for r in mine),
                "median_requests": statistics.median(r["requests"] or 0 for r in mine),
                "median_wall_s": statistics.median(r["wall_s"] for r in mine),
            }
    result = {
        "command": "python3 bench/research/small_sets_ab.py "
        + " ".join(f"--{k} {v}" for k, v in vars(args).items() if v is not None and k != "out"),
        "date": time.strftime("%Y-%m-%d"),
        "summary": summary,
        "runs": runs,
    }
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
