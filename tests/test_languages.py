"""Solutions in JAX and in C++/CUDA bound through TVM-FFI, judged like every other language
(solutions/runtimes.py, solutions/build.py). CPU paths here; the CUDA examples run on the GPU
machine (tests/gpu/test_languages_gpu.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import pytest

from conftest import EXAMPLES, FIXTURES, judge
from gpuarena.solutions import languages
from gpuarena.solutions.build import BuildError, build
from gpuarena.solutions.loader import load_solution, pack, python_language

SOLUTIONS = FIXTURES / "solutions"


# -- JAX ---------------------------------------------------------------------------------------
@pytest.mark.harness
def test_the_jax_softmax_example_passes_every_cpu_workload_with_timing():
    pytest.importorskip("jax")
    record = judge("level1/softmax", EXAMPLES / "softmax" / "jax.py", mode="benchmark")
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert record.language == "jax"
    assert record.environment.solution_runtime.startswith("jax ")
    assert all(w.time and w.reference_time and w.speedup for w in record.workloads)


@pytest.mark.harness
def test_the_pallas_softmax_example_passes_on_the_cpu_in_pallas_s_interpreter():
    """The same kernel that lowers to Triton on a GPU (tests/gpu), interpreted here."""
    pytest.importorskip("jax.experimental.pallas")
    record = judge("level1/softmax", EXAMPLES / "softmax" / "pallas.py", mode="test")
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert record.language == "jax" and [w.status for w in record.workloads] == ["PASSED", "PASSED"]


@pytest.mark.harness
def test_a_jax_solution_gets_its_destination_filled_where_the_problem_passes_one():
    pytest.importorskip("jax")
    record = judge("axpy_dest", SOLUTIONS / "jax_dest.py")
    assert record.status == "PASSED", record.reason + record.log[-2000:]


@pytest.mark.harness
def test_a_wrong_jax_answer_is_judged_not_crashed():
    pytest.importorskip("jax")
    record = judge("level1/softmax", SOLUTIONS / "jax_wrong.py", workloads=["small-64x1000"])
    assert record.status == "WRONG_VALUES", record.reason


@pytest.mark.harness
def test_the_jax_runtime_s_threads_are_no_licence_for_the_solution_s_own():
    pytest.importorskip("jax")
    record = judge("level1/softmax", SOLUTIONS / "jax_leaves_thread.py", workloads=["small-64x1000"])
    assert record.status == "REJECTED", record.reason
    assert "thread" in record.reason


def test_a_file_that_imports_jax_is_a_jax_solution_and_keeps_its_hash_when_packed(tmp_path):
    solution = load_solution(EXAMPLES / "softmax" / "jax.py")
    assert solution.manifest.language == "jax"
    packed = tmp_path / "jax.json"
    packed.write_text(pack(solution))
    assert load_solution(packed).hash == solution.hash


# -- TVM-FFI -----------------------------------------------------------------------------------
needs_compiler = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")


@pytest.mark.harness
@needs_compiler
def test_a_cpp_solution_bound_through_tvm_ffi_passes_on_the_cpu():
    pytest.importorskip("tvm_ffi")
    record = judge("level1/softmax", SOLUTIONS / "tvm_ffi_cpu", mode="benchmark", workloads=["small-64x1000"])
    assert record.status == "PASSED", record.reason + record.log[-2000:]
    assert record.language == "tvm-ffi"
    assert record.environment.solution_runtime.startswith("apache-tvm-ffi ")
    assert record.workloads[0].time and record.workloads[0].speedup


@pytest.mark.harness
def test_a_tvm_ffi_solution_with_cuda_sources_on_the_cpu_says_so_in_one_line():
    """Before, TVM-FFI's builder asked for TVM_FFI_CUDA_ARCH_LIST: no word of the device."""
    record = judge("level1/softmax", EXAMPLES / "softmax" / "tvm_ffi", workloads=["small-64x1000"])
    assert record.status == "COMPILE_ERROR"
    assert record.reason == (
        "softmax.cu is CUDA code: a tvm-ffi solution with .cu sources runs on a CUDA device: use --device cuda"
    )


@pytest.mark.harness
@needs_compiler
def test_a_tvm_ffi_compile_error_shows_the_compiler_s_message():
    pytest.importorskip("tvm_ffi")
    record = judge("level1/softmax", SOLUTIONS / "tvm_ffi_broken", workloads=["small-64x1000"])
    assert record.status == "COMPILE_ERROR"
    assert "undeclared_name_in_broken_cc" in record.reason + record.log


@pytest.mark.harness
@needs_compiler
def test_a_tvm_ffi_module_without_the_entry_point_is_a_compile_error(tmp_path):
    pytest.importorskip("tvm_ffi")
    folder = tmp_path / "renamed"
    shutil.copytree(SOLUTIONS / "tvm_ffi_cpu", folder)
    manifest = folder / "solution.toml"
    manifest.write_text(manifest.read_text().replace('entry_point = "softmax"', 'entry_point = "solve"'))
    record = judge("level1/softmax", folder, workloads=["small-64x1000"])
    assert record.status == "COMPILE_ERROR"
    assert "exports no solve()" in record.reason


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.harness  # nvcc builds the example
def test_the_tvm_ffi_cuda_example_compiles(tmp_path, monkeypatch):
    """nvcc compiles the example's kernels and binding to an object (no GPU here to link or run it)."""
    tvm_ffi_cpp = pytest.importorskip("tvm_ffi.cpp")
    monkeypatch.setenv("TVM_FFI_CUDA_ARCH_LIST", "9.0")
    folder = EXAMPLES / "softmax" / "tvm_ffi"
    built = tvm_ffi_cpp.build(
        "gpuarena_example_softmax",
        sources=[str(folder / "softmax.cu")],
        extra_cuda_cflags=["-O3", "--use_fast_math"],
        build_directory=str(tmp_path),
        output="softmax.o",
    )
    assert Path(built).stat().st_size > 0


# -- TileLang ----------------------------------------------------------------------------------
def test_a_file_that_imports_tilelang_is_a_tilelang_solution():
    solution = load_solution(EXAMPLES / "softmax" / "tilelang.py")
    assert solution.manifest.language == "tilelang"


@pytest.mark.harness
def test_a_tilelang_solution_where_tilelang_is_missing_is_a_compile_error_naming_it():
    """TileLang kernels need a GPU (and the package is large): CI has neither, so this is the
    CPU path a TileLang user meets there. The example passes on the lent GPU (tests/gpu)."""
    if importlib.util.find_spec("tilelang") is not None:
        pytest.skip("tilelang is installed here")
    record = judge("level1/softmax", EXAMPLES / "softmax" / "tilelang.py", workloads=["small-64x1000"])
    assert record.status == "COMPILE_ERROR"
    assert "pip install tilelang" in record.reason, record.reason


# -- CuTe DSL ----------------------------------------------------------------------------------
def test_a_file_that_imports_cutlass_is_a_cute_dsl_solution():
    solution = load_solution(EXAMPLES / "add" / "cute_dsl.py")
    assert solution.manifest.language == "cute-dsl"


@pytest.mark.harness
def test_a_cute_dsl_solution_where_the_package_is_missing_is_a_compile_error_naming_it():
    """CuTe DSL compiles for NVIDIA GPUs only: CI meets this path. The example passes on the lent
    GPU (tests/gpu)."""
    if importlib.util.find_spec("cutlass") is not None:
        pytest.skip("nvidia-cutlass-dsl is installed here")
    record = judge("level1/add", EXAMPLES / "add" / "cute_dsl.py", workloads=["small-64k"])
    assert record.status == "COMPILE_ERROR"
    assert "pip install nvidia-cutlass-dsl" in record.reason, record.reason


# -- Helion ---------------------------------------------------------------------------------------
def test_a_file_that_imports_helion_is_a_helion_solution():
    solution = load_solution(EXAMPLES / "add" / "helion.py")
    assert solution.manifest.language == "helion"


def test_a_gpu_mode_helion_submission_is_a_helion_solution_even_beside_triton():
    """GPU MODE's helion track: `import helion` decides, whatever else the file imports."""
    assert python_language("import torch\nimport triton\nimport helion\nimport helion.language as hl\n") == "helion"
    assert python_language("import torch\nimport triton\n") == "triton"


@pytest.mark.harness
def test_a_helion_solution_where_the_package_is_missing_is_a_compile_error_naming_it():
    """Helion's kernels need a GPU: CI meets this path. The example passes on the lent GPU
    (tests/gpu), and so do GPU MODE's helion submissions (docs/peers.md)."""
    if importlib.util.find_spec("helion") is not None:
        pytest.skip("helion is installed here")
    record = judge("level1/add", EXAMPLES / "add" / "helion.py", workloads=["small-64k"])
    assert record.status == "COMPILE_ERROR"
    assert "pip install helion" in record.reason, record.reason


# -- what every such language shares -------------------------------------------------------------
def test_a_language_whose_package_is_missing_is_a_compile_error_naming_the_package(tmp_path, monkeypatch):
    jax = languages.get("jax")
    assert jax is not None
    missing = dataclasses.replace(jax, package=languages.Package("gpuarena_no_such_module", "jax"))
    monkeypatch.setattr(languages.base, "_LANGUAGES", {**languages.base._LANGUAGES, "jax": missing})
    with pytest.raises(BuildError, match=r"needs the Python package 'jax'.*pip install jax"):
        build(load_solution(EXAMPLES / "softmax" / "jax.py"), tmp_path)


@pytest.mark.harness
def test_a_new_jax_solution_takes_the_inputs_returns_the_outputs_and_passes(tmp_path):
    """`gpuarena new solution --language jax`: inputs only (a JAX function returns its outputs,
    whatever the problem's convention), and it passes as written, as the other languages'
    scaffolds do (the reference's math on the JAX arrays' memory, until it is rewritten)."""
    pytest.importorskip("jax")
    from gpuarena.problems import load_problem
    from gpuarena.scaffold import write_solution

    problem = load_problem(FIXTURES / "problems" / "axpy_dest")
    assert problem.spec.convention == "destination"
    path = write_solution(problem, tmp_path / "axpy.py", "jax")
    text = path.read_text()
    assert "def solve(a, x, b):" in text and "NotImplementedError" not in text
    solution = load_solution(path)
    assert solution.manifest.language == "jax"
    record = judge("axpy_dest", path)
    assert record.status == "PASSED", record.reason
