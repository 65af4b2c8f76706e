"""The process Nsight Compute profiles in profile mode, inside the worker's sandbox.

Usage: python -m gpuarena.harness.profile.child SPEC.json

It loads the inputs the supervisor drew, builds the solution (or loads the problem's
reference, for the comparison), calls it once to warm up (Triton compiles, caches fill), then
once inside the NVTX range ncu is told to profile (RANGE), and saves what that call returned
for the supervisor to check. Nothing here is a verdict: a profile is the author's diagnostic,
and the supervisor only checks that the profiled call computed the right thing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from gpuarena.harness.device.backend import backend_named
from gpuarena.harness.profile.ncu_report import RANGE

OUTPUTS = "outputs.pt"


def _callable(spec: dict[str, Any], device: torch.device, destinations: int) -> Any:
    if spec.get("solution"):
        from gpuarena.solutions import runtimes
        from gpuarena.solutions.build import build
        from gpuarena.solutions.model import Solution

        solution = Solution.model_validate_json(Path(spec["solution"]).read_text())
        if solution.manifest.language in runtimes.STARTED_AHEAD:
            runtimes.start(solution.manifest.language, device)
        return build(solution, Path.cwd() / "solution", [f"output{i}" for i in range(destinations)])
    from gpuarena.problems.loader import load_problem

    return load_problem(spec["reference"]).reference


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[0]).read_text())
    device = torch.device(spec["device"])
    if device.type == "cuda":
        device = torch.device("cuda", device.index or 0)
        torch.cuda.set_device(device)
    inputs = {
        k: v.to(device) if isinstance(v, torch.Tensor) else v
        for k, v in torch.load(spec["inputs"], weights_only=True).items()
    }
    dests = [t.to(device) for t in torch.load(spec["dests"], weights_only=True)] if spec.get("dests") else []
    destination = spec["convention"] == "destination"
    solve = _callable(spec, device, len(dests) if destination else 0)

    def call() -> Any:  # positionally, as the worker calls it (a compiled solve() takes no keywords)
        if spec.get("seed") is not None:  # seeded before each call, as the worker seeds (Backend.seed)
            backend_named(device.type).seed(device, spec["seed"])
        with torch.no_grad():
            return solve(*inputs.values(), *dests) if destination else solve(*inputs.values())

    call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_push(RANGE)
    result = call()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.nvtx.range_pop()
    outputs = dests if destination else (list(result) if isinstance(result, (tuple, list)) else [result])
    torch.save([o.detach().cpu() if isinstance(o, torch.Tensor) else o for o in outputs], Path(spec["out"]) / OUTPUTS)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
