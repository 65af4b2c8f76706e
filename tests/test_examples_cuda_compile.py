"""Compile-check the CUDA example (examples/softmax/cuda/softmax.cu) with nvcc.

Runs wherever nvcc is on PATH, GPU or not: it compiles the file's device code
for Hopper (sm_90) to a cubin with the flags that torch.utils.cpp_extension
passes, and fails on any compile error. The whole file is parsed, host code
included (its dispatch instantiates the kernels ptxas builds); what a cubin
leaves out is gcc's compile of the host side, a third of a full build's time
(95 s on the 2-core machine, 34 s as a cubin). The GPU tests build and run the
example whole (tests/gpu/test_gpu.py), and tests/interop/test_kernelbench.py
compiles host code against torch/extension.h on the CPU.

A CPU-only PyTorch wheel ships the c10/cuda and ATen/cuda headers, but not
c10/cuda/impl/cuda_cmake_macros.h, and a bare CUDA toolkit may lack cuBLAS and
cuSPARSE, which ATen/cuda/CUDAContext.h includes. Where those are missing the
file is compiled with -DGPUARENA_COMPILE_CHECK, under which softmax.cu leaves
out those includes and uses the default stream and a plain cudaGetLastError()
check; everything else (the kernels, the dispatch, the pybind11 module) is
compiled the same.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.utils import cpp_extension  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "examples" / "softmax" / "cuda" / "softmax.cu"
NVCC = shutil.which("nvcc")

pytestmark = [
    pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH"),
    pytest.mark.e2e,  # the CLI compiles; torch/extension.h makes one compile take half a minute or more
]

# Headers that the full (non-GPUARENA_COMPILE_CHECK) build includes transitively.
TORCH_CUDA_HEADERS = [
    "c10/cuda/impl/cuda_cmake_macros.h",
    "ATen/cuda/CUDAContext.h",
    "c10/cuda/CUDAException.h",
    "c10/cuda/CUDAGuard.h",
]
CUDA_LIBRARY_HEADERS = ["cuda_runtime.h", "cublas_v2.h", "cublasLt.h", "cusparse.h", "cusolverDn.h"]


def cuda_home() -> Path | None:
    """The CUDA toolkit that nvcc belongs to (nvcc may be a wrapper script elsewhere)."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    dry = subprocess.run(
        [NVCC, "--dryrun", "-c", "-x", "cu", os.devnull, "-o", os.devnull], capture_output=True, text=True
    )
    match = re.search(r"^#\$ TOP=(.+)$", dry.stdout + dry.stderr, re.MULTILINE)
    if match:
        candidates.append(match.group(1).strip())
    candidates += [cpp_extension.CUDA_HOME, "/usr/local/cuda"]
    for c in candidates:
        if c and (Path(c) / "include" / "cuda_runtime.h").is_file():
            return Path(c).resolve()
    return None


def include_dirs() -> list[Path]:
    dirs = [Path(p) for p in cpp_extension.include_paths()]
    home = cuda_home()
    if home is not None:
        dirs.append(home / "include")
    dirs.append(Path(sysconfig.get_paths()["include"]))
    return dirs


def full_build_possible(dirs: list[Path]) -> bool:
    def found(name: str) -> bool:
        return any((d / name).is_file() for d in dirs)

    return all(found(h) for h in TORCH_CUDA_HEADERS + CUDA_LIBRARY_HEADERS)


def cxx_standard() -> str:
    """The -std= that cpp_extension.load uses with this torch."""
    import inspect

    return "-std=c++20" if "-std=c++20" in inspect.getsource(cpp_extension) else "-std=c++17"


def nvcc_command(source: Path, output: Path) -> tuple[list[str], str]:
    dirs = include_dirs()
    mode = "full" if full_build_possible(dirs) else "compile-check"
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    cmd = [NVCC, "-cubin", cxx_standard(), "-o", str(output), str(source)]
    cmd += [f"-I{d}" for d in dirs]
    cmd += [
        "-DTORCH_EXTENSION_NAME=gpuarena_check",
        "-DTORCH_API_INCLUDE_EXTENSION_H",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        *cpp_extension.COMMON_NVCC_FLAGS,  # -D__CUDA_NO_HALF_OPERATORS__ ..., --expt-relaxed-constexpr
        "--compiler-options",
        "-fPIC",
        "-O3",
        "--use_fast_math",  # solution.toml's extra_cuda_cflags
        "-gencode",
        "arch=compute_90,code=sm_90",  # Hopper (H100, H200)
        "-Xptxas",
        "-v",  # ptxas reports each kernel it builds for sm_90
    ]
    if mode == "compile-check":
        cmd.append("-DGPUARENA_COMPILE_CHECK")
    return cmd, mode


def test_softmax_cu_compiles_for_sm90(tmp_path: Path) -> None:
    output = tmp_path / "softmax.cubin"
    cmd, mode = nvcc_command(SOURCE, output)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"nvcc failed ({mode} mode):\n{' '.join(cmd)}\n{log[-8000:]}"
    assert output.is_file() and output.stat().st_size > 0
    # ptxas built the kernel (both vector widths, every dtype) for sm_90.
    built = re.findall(r"Compiling entry function '(\w+)' for 'sm_90'", log)
    assert any("softmax_kernel" in name for name in built), log[-8000:]
    assert len(built) >= 8, f"expected 4 dtypes x 2 vector widths, got {built}"
    print(f"nvcc compiled softmax.cu for sm_90 in {mode} mode: {len(built)} kernels")


BROKEN_HOST_CODE = """\
#include <cuda_runtime.h>

template <typename T>
__global__ void scale_kernel(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * T(2);
}

void scale(const float* x, float* y, int n) {
  scale_kernel<float><<<(n + 255) / 256, 256>>>(x, y, n)
}
"""
"""A kernel and the host function that launches it, one ';' missing there (after the launch)."""


def test_syntax_error_fails_the_compile(tmp_path: Path) -> None:
    """The check is real, host code included: the same command on a file whose host function
    lacks a ';' fails. The file is small, without torch's headers, whose parse took 30-55 s of
    this test on the 2-core VM; the compile above parses them."""
    broken = tmp_path / "broken.cu"
    broken.write_text(BROKEN_HOST_CODE)
    cmd, mode = nvcc_command(broken, tmp_path / "broken.cubin")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0, f"nvcc accepted a syntax error ({mode} mode)"
    assert "error" in said and "broken.cu(11)" in said, said[-4000:]  # the host line, not a kernel's
    fixed = tmp_path / "fixed.cu"
    fixed.write_text(BROKEN_HOST_CODE.replace("(x, y, n)\n", "(x, y, n);\n"))
    cmd, _ = nvcc_command(fixed, tmp_path / "fixed.cubin")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]  # the ';' was all that was wrong
