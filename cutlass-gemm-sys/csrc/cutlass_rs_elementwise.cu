// The fused epilogues' unfused twins: a bias per column and an activation applied to D in place,
// after a plain GEMM; and the gated linear unit over a GEMM's gate and up halves. Also split-K's
// reduction: the f32 partial products of a GEMM whose K was split over a batch, added up into D. Hand-written, not generated; compiled by cutlass-gemm-sys's build script like
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
__device__ float load(float v) { return v; }
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

// Two elements per thread (16-bit pairs); odd tails element by element. The bias is of D's type
// T, or f32 (B = float).
template <class T, class B>
__global__ void bias_activation_kernel(T *__restrict__ d, int64_t rows, int64_t cols, int64_t ld,
                                       const B *__restrict__ bias, int kind) {
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

// Split-K's reduction, kVec elements of a line per thread: D = alpha . sum_s P[s] + beta . C, in f32
// (the slices added in order, so that the result does not depend on timing).
template <class T, int kVec>
__global__ void splitk_reduce_kernel(const float *__restrict__ partials, int64_t splits, int64_t lines,
                                     int64_t inner, float alpha, float beta, const T *c, int64_t ld_c, T *d,
                                     int64_t ld_d) {
  const int64_t per_line = inner / kVec, slice = lines * inner;
  for (int64_t v = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; v < lines * per_line;
       v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t line = v / per_line, at = (v - line * per_line) * kVec;
    const float *p = partials + line * inner + at;
    float sum[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) sum[j] = 0.0f;
    for (int64_t s = 0; s < splits; ++s) {
      if constexpr (kVec == 4) {
        const float4 q = *reinterpret_cast<const float4 *>(p + s * slice);
        sum[0] += q.x, sum[1] += q.y, sum[2] += q.z, sum[3] += q.w;
      } else {
        sum[0] += p[s * slice];
      }
    }
    T out[kVec];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      float y = alpha * sum[j];
      if (beta != 0.0f) y += beta * load(c[line * ld_c + at + j]);
      out[j] = store<T>(y);
    }
    if constexpr (kVec == 4) {
      *reinterpret_cast<uint2 *>(d + line * ld_d + at) = *reinterpret_cast<const uint2 *>(out);
    } else {
      d[line * ld_d + at] = out[0];
    }
  }
}

template <class T>
int launch_reduce(const float *partials, int64_t splits, int64_t lines, int64_t inner, float alpha, float beta,
                  const void *c, int64_t ld_c, void *d, int64_t ld_d, cudaStream_t stream) {
  // Four elements a thread where every line's start is 8-byte aligned in D (and C) and 16-byte in
  // the partials.
  const bool aligned = inner % 4 == 0 && ld_d % 4 == 0 && reinterpret_cast<uintptr_t>(d) % 8 == 0 &&
                       reinterpret_cast<uintptr_t>(partials) % 16 == 0;
  const int vec = aligned ? 4 : 1;
  const int64_t work = lines * (inner / vec);
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  const unsigned grid = unsigned(blocks < 8192 ? blocks : 8192);
  const T *pc = static_cast<const T *>(c);
  T *pd = static_cast<T *>(d);
  if (aligned) {
    splitk_reduce_kernel<T, 4><<<grid, kThreads, 0, stream>>>(partials, splits, lines, inner, alpha, beta, pc,
                                                               ld_c, pd, ld_d);
  } else {
    splitk_reduce_kernel<T, 1><<<grid, kThreads, 0, stream>>>(partials, splits, lines, inner, alpha, beta, pc,
                                                               ld_c, pd, ld_d);
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e);
}

template <class T>
int launch(void *d, int64_t rows, int64_t cols, int64_t ld, const void *bias, bool bias_f32, int kind,
           cudaStream_t stream) {
  const int64_t blocks = (cols + 2 * kThreads - 1) / (2 * kThreads);
  const dim3 grid(unsigned(blocks < 64 ? blocks : 64), unsigned(rows < 65535 ? rows : 65535), 1);
  if (bias_f32) {
    bias_activation_kernel<T, float>
        <<<grid, kThreads, 0, stream>>>(static_cast<T *>(d), rows, cols, ld, static_cast<const float *>(bias), kind);
  } else {
    bias_activation_kernel<T, T>
        <<<grid, kThreads, 0, stream>>>(static_cast<T *>(d), rows, cols, ld, static_cast<const T *>(bias), kind);
  }
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e);
}

}  // namespace

extern "C" int cutlass_rs_bias_activation(void *d, int64_t rows, int64_t cols, int64_t ld, const void *bias,
                                          int32_t bias_f32, int32_t activation, int32_t dtype, void *stream) {
  if (d == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (rows < 0 || cols < 0 || ld < cols || activation < 0 || activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (bias != nullptr && reinterpret_cast<uintptr_t>(bias) % (bias_f32 != 0 ? 4 : 2) != 0)
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  if (rows == 0 || cols == 0) return CUTLASS_RS_OK;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CUTLASS_RS_DTYPE_BF16:
      return launch<__nv_bfloat16>(d, rows, cols, ld, bias, bias_f32 != 0, activation, s);
    case CUTLASS_RS_DTYPE_F16:
      return launch<__half>(d, rows, cols, ld, bias, bias_f32 != 0, activation, s);
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

extern "C" int cutlass_rs_splitk_reduce(const float *partials, int64_t splits, int64_t lines, int64_t inner,
                                        float alpha, float beta, const void *c, int64_t ld_c, void *d,
                                        int64_t ld_d, int32_t dtype, void *stream) {
  if (partials == nullptr || d == nullptr || (beta != 0.0f && c == nullptr)) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (splits < 1 || lines < 0 || inner < 0 || ld_d < inner || (beta != 0.0f && ld_c < inner))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (lines == 0 || inner == 0) return CUTLASS_RS_OK;
  auto s = static_cast<cudaStream_t>(stream);
  switch (dtype) {
    case CUTLASS_RS_DTYPE_BF16:
      return launch_reduce<__nv_bfloat16>(partials, splits, lines, inner, alpha, beta, c, ld_c, d, ld_d, s);
    case CUTLASS_RS_DTYPE_F16:
      return launch_reduce<__half>(partials, splits, lines, inner, alpha, beta, c, ld_c, d, ld_d, s);
    default:
      return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
}
