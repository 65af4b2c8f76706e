"""tvm-ffi: C++/CUDA exported with TVM_FFI_DLL_EXPORT_TYPED_FUNC and built with TVM-FFI's own
builder, as FlashInfer-Bench builds its contest's CUDA solutions."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpuarena.solutions.languages.base import BuildError, Entry, Language, Package, SelfTest, register
from gpuarena.solutions.languages.compiled import compile_sources

if TYPE_CHECKING:
    from gpuarena.solutions.model import Solution


def build(solution: Solution, folder: Path) -> Entry:
    """Called with torch tensors (TVM-FFI takes them through DLPack, on torch's current stream);
    a tensor it allocates with the environment's allocator is a torch tensor."""
    import torch
    import tvm_ffi.cpp

    if any(name.endswith(".cu") for name in solution.sources) and torch.cuda.is_available():
        # for the GPU the solution runs on (TVM-FFI would ask nvidia-smi for the first one's)
        major, minor = torch.cuda.get_device_capability()
        os.environ.setdefault("TVM_FFI_CUDA_ARCH_LIST", f"{major}.{minor}")
    module = compile_sources(tvm_ffi.cpp.load, solution)
    try:
        return module[solution.manifest.entry_point]
    except Exception:
        raise BuildError(
            f"the built module exports no {solution.manifest.entry_point}() "
            "(export it with TVM_FFI_DLL_EXPORT_TYPED_FUNC)"
        ) from None


SELF_TEST_PROGRAM = """\
// y = a + b on float32 CPU tensors; y from the caller's allocator.
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace ffi = tvm::ffi;

ffi::Tensor add(ffi::TensorView a, ffi::TensorView b) {
  ffi::Tensor y = ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, a.shape(), a.dtype(), a.device());
  const float* x0 = static_cast<const float*>(a.data_ptr());
  const float* x1 = static_cast<const float*>(b.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < a.numel(); ++i) out[i] = x0[i] + x1[i];
  return y;
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(add, add);
"""

LANGUAGE = register(
    Language(
        name="tvm-ffi",
        builder=build,
        package=Package("tvm_ffi", "apache-tvm-ffi"),
        self_test=SelfTest(sources={"add.cc": SELF_TEST_PROGRAM}, entry_point="add", devices=("cpu",)),
    )
)
