"""JAX, TVM-FFI, TileLang and CuTe DSL solutions on an NVIDIA GPU: `pytest -m gpu tests/gpu/test_languages_gpu.py`.

Each runs through the whole harness (sandbox, thread count from outside, CUPTI timing, the
device audit). The speed-of-light bound checks that the timer bills the language's own kernels: JAX
runs its work on XLA's streams, TVM-FFI on torch's; a kernel the timer missed would show as a
time under the physical floor (a softmax reads and writes each element at least once).
"""

from __future__ import annotations

import pytest
import torch

from conftest import EXAMPLES, judge, keep

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU"),
]


@pytest.mark.parametrize(
    "language, path, package",
    [
        ("jax", EXAMPLES / "softmax" / "jax.py", "jax"),
        ("pallas", EXAMPLES / "softmax" / "pallas.py", "jax.experimental.pallas"),
        ("tvm-ffi", EXAMPLES / "softmax" / "tvm_ffi", "tvm_ffi"),
        ("tilelang", EXAMPLES / "softmax" / "tilelang.py", "tilelang"),
    ],
)
def test_softmax_in_another_language_passes_with_timing(language, path, package):
    pytest.importorskip(package)
    record = judge("level1/softmax", path, device="cuda", mode="benchmark", budget_s=1.0, timeout_s=900)
    keep(f"softmax-{language}", record)
    assert record.status == "PASSED", record.reason + record.log[-3000:]
    assert record.language == ("jax" if language == "pallas" else language) and record.environment.solution_runtime
    for w in record.workloads:
        assert w.time.method == "cupti-device-time" and w.time.samples >= 10
        assert w.speedup > 0 and w.speed_of_light.bandwidth_fraction < 1.1, (w.name, w.speed_of_light)


@pytest.mark.parametrize(
    "language, path, package",
    [
        ("jax", EXAMPLES / "softmax" / "jax.py", "jax"),
        ("tvm-ffi", EXAMPLES / "softmax" / "tvm_ffi", "tvm_ffi"),
    ],
)
def test_ncu_s_figure_for_another_language(language, path, package):
    """The ncu phase reads the language's kernels too, and its figure agrees with the stream cost."""
    pytest.importorskip(package)
    record = judge(
        "level1/softmax",
        path,
        device="cuda",
        mode="benchmark",
        budget_s=0.5,
        timeout_s=900,
        workloads=["square-8192"],
        worker_isolation=False,
        kernel_duration=True,
    )
    keep(f"softmax-{language}-ncu", record)
    assert record.status == "PASSED", record.reason + record.log[-3000:]
    w = record.workloads[0]
    assert w.kernel_duration_skipped == "", w.kernel_duration_skipped
    assert 0.8 * w.time.median_us < w.time.kernel_duration_us < 1.3 * w.time.median_us + 5, w.time


@pytest.mark.parametrize(
    ("language", "path", "package"), [("cute-dsl", "cute_dsl.py", "cutlass"), ("helion", "helion.py", "helion")]
)
def test_add_in_a_language_started_ahead_passes_with_timing(language, path, package):
    """CuTe DSL's first compile and Helion's import start threads: the worker starts their runtimes
    ahead, so the solution's own import and compile (in the warm-up calls) start none of their own."""
    pytest.importorskip(package)
    record = judge("level1/add", EXAMPLES / "add" / path, device="cuda", mode="benchmark", budget_s=1.0, timeout_s=900)
    keep(f"add-{language}", record)
    assert record.status == "PASSED", record.reason + record.log[-3000:]
    assert record.language == language and record.environment.solution_runtime
    for w in record.workloads:
        assert w.time.method == "cupti-device-time" and w.time.samples >= 10
        assert w.speedup > 0 and w.speed_of_light.bandwidth_fraction < 1.1, (w.name, w.speed_of_light)
