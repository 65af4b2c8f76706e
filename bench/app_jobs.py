"""Migration checks as a runner runs them, on this machine's device: record the golden outputs of
examples/apps/mlp_reference, pack them as the service stores a migration target, and hand each
example port to `python -m gpuarena.runner.execute` (the runner's own job process, with its
sandbox) as a ranked job. Proves the runner's app path on a GPU, where the service's tests
cannot run (CI has no GPU).

    python bench/app_jobs.py --device cuda --out app-jobs.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ROOT / "examples" / "apps"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (the runner pins a GPU with CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--reference", default="mlp_reference")
    parser.add_argument("--ports", nargs="+", default=["mlp_port", "mlp_port_broken", "mlp_reference"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    from gpuarena.migration.golden import make_writable, record
    from gpuarena.migration.target import pack_golden, port_solution
    from gpuarena.runner.execute import ExecuteRequest

    results: dict = {"device": args.device, "reference": args.reference, "jobs": []}
    with tempfile.TemporaryDirectory(prefix="gpuarena-app-jobs-") as root:
        golden_dir = Path(root) / "targets" / "migration" / "mlp"
        started = time.perf_counter()
        golden, _ = record(APPS / args.reference, golden_dir, args.device)
        results["record_s"] = round(time.perf_counter() - started, 2)
        results["golden_environment"] = golden.environment
        packed = pack_golden("migration/mlp", golden_dir)
        for port in args.ports:
            out = Path(root) / f"{port}.json"
            request = ExecuteRequest(
                kind="app",
                problem=packed,
                solution=port_solution(APPS / port),
                device=args.device,
                mode="ranked",
                cache=str(Path(root) / "cache"),
                out=str(out),
            )
            env = {**os.environ, "GPUARENA_JOB_DEVICE": args.device}
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "gpuarena.runner.execute"],
                input=request.model_dump_json(),
                text=True,
                capture_output=True,
                env=env,
                timeout=900,
            )
            wall = round(time.perf_counter() - started, 2)
            if done.returncode != 0 or not out.is_file():
                results["jobs"].append(
                    {"port": port, "exit": done.returncode, "wall_s": wall, "stderr": done.stderr[-3000:]}
                )
                continue
            record_ = json.loads(out.read_text())
            report = record_["migration"]
            results["jobs"].append(
                {
                    "port": port,
                    "status": record_["status"],
                    "score": record_["score"],
                    "reason": record_["reason"],
                    "wall_s": wall,
                    "sandboxed": report["sandboxed"],
                    "containment": report["containment"],
                    "outputs": {o["file"]: o["summary"] for o in report["outputs"]},
                    "performance": report["performance"],
                    "device_name": report["environment"].get("device_name"),
                }
            )
        make_writable(golden_dir)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for job in results["jobs"]:
        print(job["port"], job.get("status"), job.get("score"), job.get("reason", job.get("stderr", ""))[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
