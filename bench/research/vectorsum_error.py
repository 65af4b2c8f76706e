"""GPU MODE's pmpp/vectorsum_py `submission.py` (a Triton sum of 1024-element blocks into one
float32 accumulator by atomic adds) on its own, outside any harness: its error against the task's
float64 reference on GPU MODE's largest benchmark, for GPU MODE's seed and others, three calls on
each input. gpuarena's test mode failed it (a relative error of 2.1e-4 against an rtol of
1e-5, its second trial) where GPU MODE's eval.py passed it; this tells the submission's own
numerics from anything the harness does.

    python bench/research/vectorsum_error.py .gpu/reference-kernels/problems/pmpp/vectorsum_py --out r.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", type=Path)
    parser.add_argument("--size", type=int, default=52428800)
    parser.add_argument("--seeds", type=int, default=24)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    task = args.task.resolve()
    sys.path[:0] = [str(task), str(task.parent)]
    import reference  # the task's own: ref_kernel, generate_input
    import submission

    rows = []
    for seed in [12345, *range(1, args.seeds)]:
        data = reference.generate_input(size=args.size, seed=seed)
        expected = float(reference.ref_kernel(data))
        got = [float(submission.custom_kernel(data)) for _ in range(3)]
        torch.cuda.synchronize()
        errors = [abs(g - expected) / abs(expected) for g in got]
        rows.append(
            {
                "seed": seed,
                "mean": float(data.double().mean()),
                "expected": expected,
                "got": got,
                "relative_errors": errors,
                "over_rtol": sum(e > args.rtol for e in errors),
            }
        )
        print(f"seed {seed}: mean {rows[-1]['mean']:.3f} errors {[f'{e:.2e}' for e in errors]}", flush=True)
    result = {
        "command": "python " + " ".join(sys.argv),
        "device": torch.cuda.get_device_name(),
        "size": args.size,
        "rtol": args.rtol,
        "calls_over_rtol": sum(r["over_rtol"] for r in rows),
        "calls": 3 * len(rows),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['calls_over_rtol']} of {result['calls']} calls over rtol {args.rtol}")


if __name__ == "__main__":
    main()
