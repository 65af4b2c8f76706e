// Softmax over the last dimension of a 2-D tensor, in CUDA C++ bound through TVM-FFI.
//
// The function takes a tvm::ffi::TensorView (any DLPack tensor: the harness passes torch
// tensors) and returns a tvm::ffi::Tensor allocated by the caller's environment, so torch
// gets a torch tensor back. The kernel runs on the caller's current stream
// (TVMFFIEnvGetStream), as a torch extension would on torch's.
//
// One thread block per row: each thread keeps an online max m and sum s = sum(exp(x - m))
// in float32 over its share of the row, the block merges the (m, s) pairs, and a second
// pass writes exp(x - m) / s. Two reads and one write of the row for any row length, in
// 16-byte vectors where the row allows it (the same kernel as examples/softmax/cuda/).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/extra/cuda/base.h>
#include <tvm/ffi/function.h>

#include <cmath>
#include <cstdint>

namespace ffi = tvm::ffi;

namespace {

constexpr int kWarp = 32;
constexpr int kMaxThreads = 1024;

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  if (top == -INFINITY) return;  // both empty: stay empty rather than NaN
  s = s * __expf(m - top) + s2 * __expf(m2 - top);
  m = top;
}

// Every thread's (m, s) merged across the block; every thread gets the result.
__device__ __forceinline__ void block_merge(float& m, float& s) {
  __shared__ float shared_m[kMaxThreads / kWarp];
  __shared__ float shared_s[kMaxThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
  if (lane == 0) shared_m[warp] = m, shared_s[warp] = s;
  __syncthreads();
  if (warp == 0) {
    m = lane < warps ? shared_m[lane] : -INFINITY;
    s = lane < warps ? shared_s[lane] : 0.f;
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      merge(m, s, __shfl_xor_sync(0xffffffffu, m, offset), __shfl_xor_sync(0xffffffffu, s, offset));
    if (lane == 0) shared_m[0] = m, shared_s[0] = s;
  }
  __syncthreads();
  m = shared_m[0];
  s = shared_s[0];
}

// VEC consecutive elements, loaded or stored as one access of up to 16 bytes.
template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

// VEC > 1 needs cols % VEC == 0 and 16-byte aligned rows (checked by the caller).
template <typename T, int VEC>
__global__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, int64_t cols) {
  using V = Vec<T, VEC>;
  const V* in = reinterpret_cast<const V*>(x + blockIdx.x * cols);
  V* out = reinterpret_cast<V*>(y + blockIdx.x * cols);
  const int64_t n = cols / VEC;
  float m = -INFINITY, s = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const V chunk = in[i];
    float top = m;
    for (int k = 0; k < VEC; ++k) top = fmaxf(top, static_cast<float>(chunk.v[k]));
    if (top == -INFINITY) continue;  // all -inf so far: nothing to add
    float sum = 0.f;
    for (int k = 0; k < VEC; ++k) sum += __expf(static_cast<float>(chunk.v[k]) - top);
    s = s * __expf(m - top) + sum;
    m = top;
  }
  block_merge(m, s);
  const float inv = 1.f / s;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const V chunk = in[i];
    V result;
    for (int k = 0; k < VEC; ++k) result.v[k] = static_cast<T>(__expf(static_cast<float>(chunk.v[k]) - m) * inv);
    out[i] = result;
  }
}

// Threads per block: enough that each handles about 4 vectors (2 when few rows fill the GPU).
int threads_for(int64_t vectors, int64_t rows) {
  const int64_t per_thread = rows < 1024 ? 2 : 4;
  int threads = 128;
  while (threads < kMaxThreads && threads * per_thread < vectors) threads *= 2;
  return threads;
}

template <typename T>
void launch(ffi::TensorView x, ffi::Tensor& y, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const auto* in = static_cast<const T*>(x.data_ptr());
  auto* out = static_cast<T*>(y.data_ptr());
  const bool aligned = reinterpret_cast<std::uintptr_t>(in) % 16 == 0 && reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
  const auto grid = static_cast<unsigned int>(rows);
  if (cols % kVec == 0 && aligned) {
    softmax_rows<T, kVec><<<grid, threads_for(cols / kVec, rows), 0, stream>>>(in, out, cols);
  } else {
    softmax_rows<T, 1><<<grid, threads_for(cols, rows), 0, stream>>>(in, out, cols);
  }
}

}  // namespace

ffi::Tensor solve(ffi::TensorView x) {
  if (x.device().device_type != kDLCUDA) TVM_FFI_THROW(ValueError) << "softmax: x must be on a CUDA device";
  if (x.ndim() != 2) TVM_FFI_THROW(ValueError) << "softmax: x must be 2-D, got " << x.ndim() << " dims";
  if (!x.IsContiguous()) TVM_FFI_THROW(ValueError) << "softmax: x must be contiguous";
  const int64_t rows = x.size(0), cols = x.size(1);
  ffi::Tensor y = ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, x.shape(), x.dtype(), x.device());
  if (rows == 0 || cols == 0) return y;
  TVM_FFI_CHECK_CUDA_ERROR(cudaSetDevice(x.device().device_id));
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  const DLDataType t = x.dtype();
  if (t.code == kDLFloat && t.bits == 32) {
    launch<float>(x, y, rows, cols, stream);
  } else if (t.code == kDLBfloat && t.bits == 16) {
    launch<__nv_bfloat16>(x, y, rows, cols, stream);
  } else if (t.code == kDLFloat && t.bits == 16) {
    launch<__half>(x, y, rows, cols, stream);
  } else {
    TVM_FFI_THROW(TypeError) << "softmax: float32, bfloat16 or float16 only";
  }
  TVM_FFI_CHECK_CUDA_ERROR(cudaGetLastError());
  return y;
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(solve, solve);
