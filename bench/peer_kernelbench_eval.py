"""KernelBench's side of bench/peer_kernelbench.py, in its `--kb-child` process: KernelBench's
eval module loaded from a copy of its repository (its top-level imports that the eval never
calls stood in for where missing) and one verdict of `eval_kernel_against_ref`, called as its
scripts/run_and_check.py calls it locally."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import sys
import time
import types
from pathlib import Path
from typing import Any

# scripts/run_and_check.py's defaults (ScriptConfig) for a local eval
KB_SETTINGS: dict[str, Any] = {
    "num_correct_trials": 5,
    "num_perf_trials": 100,
    "measure_performance": True,
    "timing_method": "cuda_event",
    "precision": "fp32",
    "verbose": False,
}
UNCALLED = {
    "openai": "kernelbench.utils imports OpenAI for query_server (LLM inference)",
    "litellm": "kernelbench.utils imports completion for query_server (LLM inference)",
    "dotenv": "kernelbench.utils calls load_dotenv() at import (API keys from a .env file)",
    "tqdm": "kernelbench.utils' progress bars (maybe_multithread, maybe_multiprocess_cuda)",
    "requests": "kernelbench.eval imports it and never uses it",
}
"""Top-level imports of KernelBench's package that eval_kernel_against_ref never calls: the
only ones this bench may replace by an empty module where they are not installed."""
ARCH_BY_CAPABILITY = {7: "Volta", 8: "Ampere", 9: "Hopper", 10: "Blackwell", 12: "Blackwell"}


def gpu_arch(capability: tuple[int, int]) -> str | None:
    """KernelBench's architecture name (utils.NVIDIA_ARCHS) for a compute capability."""
    major, minor = capability
    if (major, minor) == (7, 5):
        return "Turing"
    if (major, minor) == (8, 9):
        return "Ada"
    return ARCH_BY_CAPABILITY.get(major)


def _stand_in(name: str) -> types.ModuleType:
    """An empty module for NAME: any name imported from it is a function that raises."""
    module = types.ModuleType(name, f"empty stand-in for {name}, by bench/peer_kernelbench.py: {UNCALLED[name]}")

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{name} is an empty stand-in in bench/peer_kernelbench.py: {UNCALLED[name]}")

    def attribute(attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return refuse

    module.__getattr__ = attribute  # type: ignore[method-assign]
    if name == "dotenv":
        module.load_dotenv = lambda *args, **kwargs: False  # type: ignore[attr-defined]
    return module


def load_kernelbench(root: Path) -> tuple[Any, list[str], list[str]]:
    """KernelBench's eval module from ROOT/src, its uncalled imports stood in for where missing:
    (kernelbench.eval, the stubbed names, the top-level packages the import brought in)."""
    before = {m.split(".")[0] for m in sys.modules}
    stubbed = []
    for name in UNCALLED:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            sys.modules[name] = _stand_in(name)
            stubbed.append(name)
    sys.path.insert(0, str(root / "src"))
    kb_eval = importlib.import_module("kernelbench.eval")
    brought = {m.split(".")[0] for m in sys.modules} - before - {"kernelbench"} - set(stubbed)
    return kb_eval, stubbed, sorted(m for m in brought if not m.startswith("_") and m not in sys.stdlib_module_names)


def kb_child(args: argparse.Namespace) -> dict[str, Any]:
    """One KernelBench verdict, as scripts/run_and_check.py's local path runs it."""
    started = time.perf_counter()
    out: dict[str, Any] = {"result": None}
    kb_eval, out["stubbed"], out["imported"] = load_kernelbench(args.kernelbench)
    import torch
    from kernelbench.kernel_static_checker import validate_kernel_static
    from kernelbench.utils import set_gpu_arch

    out["import_s"] = round(time.perf_counter() - started, 3)
    ref_src = Path(args.problem_file).read_text()
    kernel_src = Path(args.solution_file).read_text()
    valid, errors, warnings = validate_kernel_static(
        kernel_src, backend=args.backend, precision=KB_SETTINGS["precision"]
    )
    out["static"] = {"valid": valid, "errors": errors, "warnings": warnings}
    device = torch.device("cuda:0")
    out["arch"] = gpu_arch(torch.cuda.get_device_capability(device)) if torch.cuda.is_available() else None
    if out["arch"]:
        set_gpu_arch([out["arch"]])
    build_dir = os.path.join("test_build", str(hash(kernel_src)))  # run_and_check.py's, under the cwd
    t0 = time.perf_counter()
    try:
        result = kb_eval.eval_kernel_against_ref(
            original_model_src=ref_src,
            custom_model_src=kernel_src,
            measure_performance=KB_SETTINGS["measure_performance"],
            timing_method=KB_SETTINGS["timing_method"],
            verbose=KB_SETTINGS["verbose"],
            num_correct_trials=KB_SETTINGS["num_correct_trials"],
            num_perf_trials=KB_SETTINGS["num_perf_trials"],
            build_dir=build_dir,
            device=device,
            backend=args.backend,
            precision=kb_eval.get_torch_dtype_from_string(KB_SETTINGS["precision"]),
        )
        out["result"] = None if result is None else json.loads(json.dumps(result.model_dump(), default=str))
    except Exception as exc:  # run_and_check.py's last-level catch: a verdict, not a crash
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["result"] = {"compiled": False, "correctness": False, "metadata": {"other_error": str(exc)[:2000]}}
    out["eval_s"] = round(time.perf_counter() - t0, 3)
    return out
