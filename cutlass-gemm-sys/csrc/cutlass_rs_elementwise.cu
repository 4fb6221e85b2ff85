// The fused epilogues' unfused twins: a bias per column and an activation applied to D in place,
// after a plain GEMM; and the gated linear unit over a GEMM's gate and up halves. Hand-written, not generated; compiled by cutlass-gemm-sys's build script like
// the staging copies. It is what a framework without fused epilogues runs after the GEMM (one more
// pass over D), and what `cutlass-profiler profile --epilogue` compares the fused GEMM with.
//
// D is `rows` lines of `cols` contiguous elements (bf16 or f16), line r at element r * ld. The
// arithmetic is the fused epilogue's: f32, the same activations (cutlass_rs_activation.cuh).

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"
#include "cutlass_rs_activation.cuh"

namespace {

constexpr int kThreads = 256;

template <class T>
__device__ float load(T v);
template <>
__device__ float load(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ float load(__half v) { return __half2float(v); }
template <class T>
__device__ T store(float v);
template <>
__device__ __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __half store(float v) { return __float2half_rn(v); }

// Two elements per thread (16-bit pairs); odd tails element by element.
template <class T>
__global__ void bias_activation_kernel(T *__restrict__ d, int64_t rows, int64_t cols, int64_t ld,
                                       const T *__restrict__ bias, int kind) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    T *line = d + r * ld;
    for (int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2; c < cols;
         c += int64_t(gridDim.x) * blockDim.x * 2) {
      for (int64_t j = c; j < c + 2 && j < cols; ++j) {
        float v = load(line[j]);
        if (bias != nullptr) v += load(bias[j]);
        line[j] = store<T>(cutlass_rs::activate(v, kind));
      }
    }
  }
}

// out[r][j] = act(h[r][j]) * h[r][cols + j]: a GEMM's gate and up halves (cols each) into the gated
// linear unit, two outputs per thread.
template <class T>
__global__ void gated_activation_kernel(const T *__restrict__ h, int64_t rows, int64_t cols, int64_t ld_h,
                                        T *__restrict__ out, int64_t ld_out, int kind) {
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const T *line = h + r * ld_h;
    T *o = out + r * ld_out;
    for (int64_t c = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 2; c < cols;
         c += int64_t(gridDim.x) * blockDim.x * 2) {
      for (int64_t j = c; j < c + 2 && j < cols; ++j) {
        o[j] = store<T>(cutlass_rs::activate(load(line[j]), kind) * load(line[cols + j]));
      }
    }
  }
}

template <class T>
int launch_gated(const void *h, int64_t rows, int64_t cols, int64_t ld_h, void *out, int64_t ld_out, int kind,
                 cudaStream_t stream) {
  const int64_t blocks = (cols + 2 * kThreads - 1) / (2 * kThreads);
  const dim3 grid(unsigned(blocks < 64 ? blocks : 64), unsigned(rows < 65535 ? rows : 65535), 1);
  gated_activation_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T *>(h), rows, cols, ld_h,
                                                             static_cast<T *>(out), ld_out, kind);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e);
}

template <class T>
int launch(void *d, int64_t rows, int64_t cols, int64_t ld, const void *bias, int kind, cudaStream_t stream) {
  const int64_t blocks = (cols + 2 * kThreads - 1) / (2 * kThreads);
  const dim3 grid(unsigned(blocks < 64 ? blocks : 64), unsigned(rows < 65535 ? rows : 65535), 1);
  bias_activation_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<T *>(d), rows, cols, ld,
                                                            static_cast<const T *>(bias), kind);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e);
}

}  // namespace

extern "C" int cutlass_rs_bias_activation(void *d, int64_t rows, int64_t cols, int64_t ld, const void *bias,
                                          int32_t activation, int32_t dtype, void *stream) {
  if (d == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (rows < 0 || cols < 0 || ld < cols || activation < 0 || activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (rows == 0 || cols == 0) return CUTLASS_RS_OK;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CUTLASS_RS_DTYPE_BF16:
      return launch<__nv_bfloat16>(d, rows, cols, ld, bias, activation, s);
    case CUTLASS_RS_DTYPE_F16:
      return launch<__half>(d, rows, cols, ld, bias, activation, s);
    default:
      return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
}

extern "C" int cutlass_rs_gated_activation(const void *h, int64_t rows, int64_t cols, int64_t ld_h, void *out,
                                           int64_t ld_out, int32_t activation, int32_t dtype, void *stream) {
  if (h == nullptr || out == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (rows < 0 || cols < 0 || ld_h < 2 * cols || ld_out < cols || activation < 0 ||
      activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (rows == 0 || cols == 0) return CUTLASS_RS_OK;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CUTLASS_RS_DTYPE_BF16:
      return launch_gated<__nv_bfloat16>(h, rows, cols, ld_h, out, ld_out, activation, s);
    case CUTLASS_RS_DTYPE_F16:
      return launch_gated<__half>(h, rows, cols, ld_h, out, ld_out, activation, s);
    default:
      return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
}
