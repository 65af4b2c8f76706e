"""Fixtures for the FlashInfer-Trace tests: the fixture documents, imported problems, and
FlashInfer-Bench's own schema models where its package is installed."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from pathlib import Path

import pytest

from gpuarena.interop.flashinfer_import import import_definition
from gpuarena.problems import load_problem

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
RMSNORM = FIXTURES / "rmsnorm_h256"
SOFTMAX = FIXTURES / "softmax"
INVALID = FIXTURES / "invalid"
ROOT = HERE.parents[1]


@pytest.fixture(scope="session")
def rmsnorm_problem(tmp_path_factory):
    """rmsnorm_h256 imported (destination convention, FlashInfer's default)."""
    folder = tmp_path_factory.mktemp("imported") / "rmsnorm_h256"
    import_definition(RMSNORM / "definition.json", RMSNORM / "workloads.jsonl", folder)
    return load_problem(folder)


@pytest.fixture(scope="session")
def softmax_problem(tmp_path_factory):
    """softmax_rows imported with the return convention."""
    folder = tmp_path_factory.mktemp("imported") / "softmax_rows"
    import_definition(SOFTMAX / "definition.json", SOFTMAX / "workloads.jsonl", folder, convention="return")
    return load_problem(folder)


@functools.cache
def _flashinfer_bench_data() -> types.SimpleNamespace:
    """FlashInfer-Bench's data models and JSON loaders, loaded once per process (a bare package
    left in sys.modules has no spec, so a second find_spec would fail). Its package's __init__ imports its whole
    runtime (flashinfer, tvm-ffi, safetensors, ...); where those are missing, the schema modules,
    which need pydantic only, are loaded on their own under a bare package."""
    spec = importlib.util.find_spec("flashinfer_bench")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("flashinfer-bench is not installed (pip install flashinfer-bench --no-deps)")
    names = ("definition", "workload", "solution", "trace", "json_utils")
    try:
        data = importlib.import_module("flashinfer_bench.data")
        modules = {name: importlib.import_module(f"flashinfer_bench.data.{name}") for name in names}
    except Exception:  # its runtime dependencies are absent
        for key in [k for k in sys.modules if k == "flashinfer_bench" or k.startswith("flashinfer_bench.")]:
            del sys.modules[key]
        root = Path(list(spec.submodule_search_locations)[0])
        for package, path in (("flashinfer_bench", root), ("flashinfer_bench.data", root / "data")):
            module = types.ModuleType(package)
            module.__path__ = [str(path)]
            sys.modules[package] = module
        modules = {name: importlib.import_module(f"flashinfer_bench.data.{name}") for name in names}
        data = None
    return types.SimpleNamespace(
        Definition=modules["definition"].Definition,
        Workload=modules["workload"].Workload,
        Solution=modules["solution"].Solution,
        Trace=modules["trace"].Trace,
        load_json_file=modules["json_utils"].load_json_file,
        load_jsonl_file=modules["json_utils"].load_jsonl_file,
        whole_package=data is not None,
    )


@pytest.fixture(scope="session")
def fib():
    return _flashinfer_bench_data()
