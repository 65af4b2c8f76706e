"""Problems judged as `gpuarena suite run` judges them (a framework's implementation of each, the
suite's options, one evaluator for all, in order), with every record written out whole: the
suite's result keeps a problem's reason only, and a harness failure's traceback and the phases
live in the record. DeepSeek-V3's MoE layer under torch.compile passed alone on an H200 and was
REJECTED after its MLA attention in one suite process.

    python bench/research/framework_record.py dataset/problems/level3/layer-deepseek-v3-mla-attention \
        dataset/problems/level3/layer-deepseek-v3-moe --framework torch-compile --device cuda --out records.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from gpuarena.harness.evaluator import Evaluator
from gpuarena.harness.supervisor import RunOptions
from gpuarena.problems.loader import load_problem
from gpuarena.suite.frameworks import framework_solution


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", type=Path, nargs="+")
    parser.add_argument("--framework", default="torch-compile")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--budget", type=float, default=1.0)
    parser.add_argument("--time-limit", type=float, default=math.inf)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    target = "cuda" if args.device.startswith("cuda") else "cpu"
    records = []
    with Evaluator(args.device) as evaluator:
        for folder in args.problems:
            problem = load_problem(folder)
            options = RunOptions(
                device=args.device,
                mode="benchmark",
                budget_s=args.budget,
                workloads=[w.name for w in problem.spec.workloads if target in w.devices],
                timeout_s=min(problem.spec.time_limit_for("benchmark"), args.time_limit),
                kernel_duration=False,
                device_audit=False,
            )
            record = evaluator.judge(problem, framework_solution(problem, args.framework), options)
            records.append(record.model_dump(mode="json"))
            args.out.write_text(json.dumps(records, indent=1))
            peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else 0.0
            print(f"== {problem.id}: {record.status.value} {record.reason[:2000]}")
            print(f"phases {record.phases}; the supervisor's peak allocated so far {peak:.1f} GiB")
            for workload in record.workloads:
                print(workload.name, workload.status.value, (workload.reason or "")[:500])
            print(record.log[-6000:])


if __name__ == "__main__":
    main()
