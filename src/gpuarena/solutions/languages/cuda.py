"""cuda: C++/CUDA sources bound with torch's extensions (torch.utils.cpp_extension.load); the
entry point is a function the built module exports."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuarena.solutions.languages.base import BuildError, Entry, Language, SelfTest, register
from gpuarena.solutions.languages.compiled import compile_sources

if TYPE_CHECKING:
    from gpuarena.solutions.model import Solution


def build(solution: Solution, folder: Path) -> Entry:
    from torch.utils.cpp_extension import load

    module = compile_sources(load, solution, verbose=False)
    entry = getattr(module, solution.manifest.entry_point, None)
    if not callable(entry):
        raise BuildError(f"the built module exports no {solution.manifest.entry_point}()")
    return entry


SELF_TEST_PROGRAM = """\
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

torch::Tensor solve(torch::Tensor a, torch::Tensor b) {
  auto y = torch::empty_like(a);
  int64_t n = a.numel();
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  add_kernel<<<(n + 255) / 256, 256, 0, stream>>>(a.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("solve", &solve); }
"""

LANGUAGE = register(
    Language(
        name="cuda",
        builder=build,
        self_test=SelfTest(sources={"add.cu": SELF_TEST_PROGRAM}, entry_point="solve", devices=("cuda",)),
    )
)
