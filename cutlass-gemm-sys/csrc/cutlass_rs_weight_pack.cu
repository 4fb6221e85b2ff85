// Weight preparation for the weight-only GEMM kernels: packing 4-bit weights (plain, GPTQ or AWQ)
// into the order the SM90 kernels read (and back into the plain order the SM100 ones read), the kernels' additive zeros from a checkpoint's zero points, a
// group-wise 4-bit quantizer of 16-bit weights and per-channel FP8 and int8 ones. Hand-written, not
// generated; compiled by cutlass-gemm-sys's build script for every selected architecture. Run once,
// at load time. The C ABI is in cutlass_rs_weight_prep_abi.h.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include "cutlass/numeric_types.h"
#include "cutlass_rs_abi.h"
#include "cutlass_rs_weight_layout.hpp"
#include "cutlass_rs_weight_prep_abi.h"

namespace {

constexpr int kThreads = 256;

// AWQ packs the eight values of a word in the order 0 2 4 6 1 3 5 7: value j sits at position
// kAwqPosition[j].
__device__ __constant__ int kAwqPosition[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// The 4-bit value (row j, column i) of an n x k weight in one of the ABI's formats.
__device__ inline uint32_t nibble(int32_t format, const void *src, int64_t n, int64_t k, int64_t j, int64_t i) {
  if (format == CUTLASS_RS_WEIGHT_FORMAT_PLAIN) {
    const uint8_t *b = static_cast<const uint8_t *>(src);
    const int64_t e = j * k + i;
    return (b[e >> 1] >> ((e & 1) * 4)) & 0xF;
  }
  const uint32_t *w = static_cast<const uint32_t *>(src);
  if (format == CUTLASS_RS_WEIGHT_FORMAT_GPTQ) {
    return (w[(i >> 3) * n + j] >> ((i & 7) * 4)) & 0xF;
  }
  return (w[i * (n >> 3) + (j >> 3)] >> (kAwqPosition[j & 7] * 4)) & 0xF;
}

// One thread per value: its place in the packed order, OR-ed into the zeroed destination.
template <class Wide>
__global__ void pack_kernel(int32_t format, const void *src, uint32_t *dst, int64_t n, int64_t k,
                            uint32_t flip) {
  const auto layout = cutlass_rs::weight::packed_layout<Wide>(static_cast<int>(n), static_cast<int>(k));
  const int64_t total = n * k;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / k, i = e - j * k;
    const uint32_t v = nibble(format, src, n, k, j, i) ^ flip;
    const int64_t at = layout(static_cast<int>(j), static_cast<int>(i), 0);
    atomicOr(dst + (at >> 3), v << ((at & 7) * 4));
  }
}

// pack_kernel's inverse: one thread per value, read at its place in the packed order and OR-ed
// into the zeroed plain destination (row j's k values, two a byte, the even column in the low
// nibble).
template <class Wide>
__global__ void unpack_kernel(const uint32_t *src, uint32_t *dst, int64_t n, int64_t k) {
  const auto layout = cutlass_rs::weight::packed_layout<Wide>(static_cast<int>(n), static_cast<int>(k));
  const int64_t total = n * k;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / k, i = e - j * k;
    const int64_t at = layout(static_cast<int>(j), static_cast<int>(i), 0);
    const uint32_t v = (src[at >> 3] >> ((at & 7) * 4)) & 0xF;
    atomicOr(dst + (e >> 3), v << ((e & 7) * 4));
  }
}

template <class T>
__device__ inline float to_float(T v);
template <>
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <>
__device__ inline float to_float(__half v) { return __half2float(v); }
template <class T>
__device__ inline T from_float(float v);
template <>
__device__ inline __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ inline __half from_float(float v) { return __float2half_rn(v); }

// z[g][j] = -s[g][j] * zp(g, j), rounded once to T.
template <class T>
__global__ void zeros_kernel(int32_t format, const void *qzeros, const T *scales, T *zeros, int64_t groups,
                             int64_t n, int32_t offset) {
  const int64_t total = groups * n;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t g = e / n, j = e - g * n;
    int32_t zp;
    if (format == CUTLASS_RS_WEIGHT_FORMAT_PLAIN) {
      zp = static_cast<const uint8_t *>(qzeros)[e];
    } else {
      const uint32_t word = static_cast<const uint32_t *>(qzeros)[g * (n >> 3) + (j >> 3)];
      const int pos = format == CUTLASS_RS_WEIGHT_FORMAT_GPTQ ? static_cast<int>(j & 7) : kAwqPosition[j & 7];
      zp = static_cast<int32_t>((word >> (pos * 4)) & 0xF);
    }
    // GPTQ's original format stores zp - 1 in four bits (a zero point of 0 wraps to 15): adding
    // the offset back wraps the same way.
    zp = (zp + offset) & 0xF;
    zeros[e] = from_float<T>(-to_float(scales[e]) * static_cast<float>(zp));
  }
}

// NaN in f32: the scale of a group (FP8: a row) that holds NaN or +-Inf, which 4 bits (e4m3)
// cannot hold, so that the weight's row gives NaN through every kernel.
constexpr uint32_t kNanBits = 0x7FC00000u;

// One thread per (row, group): the group's scale (and zero point), then its values, two per byte.
// A group holding NaN or +-Inf gets the scale NaN, the zero point 0 and the values qlo.
template <class T>
__global__ void quantize_kernel(const T *w, int64_t ldw, int64_t n, int64_t k, int64_t group_size,
                                int32_t zero_points, uint8_t *q, T *scales, uint8_t *zp) {
  const int64_t groups = k / group_size;
  const int64_t total = n * groups;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e / groups, g = e - j * groups;
    const T *row = w + j * ldw + g * group_size;
    float lo = 0.f, hi = 0.f, amax = 0.f;
    bool finite = true;
    for (int64_t i = 0; i < group_size; ++i) {
      const float v = to_float(row[i]);
      lo = fminf(lo, v);
      hi = fmaxf(hi, v);
      amax = fmaxf(amax, fabsf(v));
      finite = finite && isfinite(v);
    }
    float s = zero_points ? (hi - lo) / 15.f : amax / 7.f;
    const T s_stored = from_float<T>(s > 0.f ? s : 1.f);
    s = to_float(s_stored);
    // A scale that rounds to zero or overflows falls back to 1 (the group is then all zeros or
    // saturates); the reference sees the stored scale either way.
    if (!(s > 0.f) || isinf(s)) s = 1.f;
    if (!finite) s = __uint_as_float(kNanBits);
    scales[g * n + j] = from_float<T>(s);
    int32_t z = 0;
    if (zero_points) {
      if (finite) z = static_cast<int32_t>(fminf(fmaxf(rintf(-lo / s), 0.f), 15.f));
      zp[g * n + j] = static_cast<uint8_t>(z);
    }
    const float qlo = zero_points ? 0.f : -8.f, qhi = zero_points ? 15.f : 7.f;
    uint8_t *out = q + (j * k + g * group_size) / 2;
    for (int64_t i = 0; i < group_size; i += 2) {
      uint32_t pair = 0;
      for (int h = 0; h < 2; ++h) {
        const float v = finite ? fminf(fmaxf(rintf(to_float(row[i + h]) / s) + z, qlo), qhi) : qlo;
        pair |= (static_cast<uint32_t>(static_cast<int32_t>(v)) & 0xF) << (4 * h);
      }
      out[i / 2] = static_cast<uint8_t>(pair);
    }
  }
}

// The per-channel formats of quantize_row_kernel.
enum class PerChannel { kE4m3, kS8 };

// One block per row: the row's largest magnitude, its scale s = max|w| / qmax rounded to T (1 where
// that rounds to zero or overflows), then q = e4m3(w / s), rounded to nearest even and saturated
// (qmax 448), or q = clamp(round(w / s), -127, 127), rounded to nearest even (s8, qmax 127). A row
// holding NaN or +-Inf gets the scale NaN and the values 0x7F (e4m3's NaN) or 0.
constexpr int kFp8Threads = 256;

template <class T, PerChannel kFormat>
__global__ void quantize_row_kernel(const T *w, int64_t ldw, int64_t n, int64_t k, uint8_t *q, T *scales) {
  constexpr float kMax = kFormat == PerChannel::kE4m3 ? 448.f : 127.f;
  constexpr uint8_t kNotFinite = kFormat == PerChannel::kE4m3 ? 0x7F : 0;
  __shared__ float warp_max[kFp8Threads / 32];
  __shared__ float row_scale;
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const T *row = w + j * ldw;
    float amax = 0.f;
    bool finite = true;
    for (int64_t i = threadIdx.x; i < k; i += kFp8Threads) {
      const float v = to_float(row[i]);
      amax = fmaxf(amax, fabsf(v));
      finite = finite && isfinite(v);
    }
    for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
    // A barrier, as __syncthreads, that also tells every thread whether any value was not finite.
    const bool row_finite = !__syncthreads_or(!finite);
    if (threadIdx.x == 0) {
      float m = 0.f;
      for (int i = 0; i < kFp8Threads / 32; ++i) m = fmaxf(m, warp_max[i]);
      float s = to_float(from_float<T>(m / kMax));
      if (!(s > 0.f) || isinf(s)) s = 1.f;
      if (!row_finite) s = __uint_as_float(kNanBits);
      scales[j] = from_float<T>(s);
      row_scale = s;
    }
    __syncthreads();
    const float s = row_scale;
    for (int64_t i = threadIdx.x; i < k; i += kFp8Threads) {
      uint8_t v = kNotFinite;
      if (row_finite) {
        const float x = to_float(row[i]) / s;
        if constexpr (kFormat == PerChannel::kE4m3) {
          v = static_cast<uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
        } else {
          v = static_cast<uint8_t>(static_cast<int8_t>(fminf(fmaxf(rintf(x), -127.f), 127.f)));
        }
      }
      q[j * k + i] = v;
    }
    __syncthreads();
  }
}

// One block per row of an FP8 weight: the row's scale becomes NaN where a byte is e4m3's NaN
// (bit 7 of (b & 0x7F) + 1 is set exactly for b & 0x7F == 0x7F; no carry leaves a byte).
template <class T>
__global__ void fp8_nan_rows_kernel(const uint8_t *q, int64_t n, int64_t k, T *scales) {
  for (int64_t j = blockIdx.x; j < n; j += gridDim.x) {
    const uint8_t *row = q + j * k;
    uint32_t bits = 0;
    for (int64_t i = 4 * int64_t(threadIdx.x); i < k; i += 4 * kFp8Threads) {
      uint32_t word = 0;
      for (int b = 0; b < 4 && i + b < k; ++b) word |= uint32_t(row[i + b]) << (8 * b);
      bits |= (word & 0x7F7F7F7Fu) + 0x01010101u;
    }
    if (__syncthreads_or((bits & 0x80808080u) != 0) && threadIdx.x == 0)
      scales[j] = from_float<T>(__uint_as_float(kNanBits));
  }
}

int launch_error() {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
}

unsigned blocks_for(int64_t total) {
  int64_t b = (total + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

}  // namespace

extern "C" int cutlass_rs_weight_pack(int32_t format, const void *src, void *dst, int64_t n, int64_t k,
                                      int32_t flip, void *stream) {
  if (src == nullptr || dst == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (format < CUTLASS_RS_WEIGHT_FORMAT_PLAIN || format > CUTLASS_RS_WEIGHT_FORMAT_AWQ || (flip != 0 && flip != 8))
    return CUTLASS_RS_ERROR_INVALID;
  if (n <= 0 || k <= 0 || n % CUTLASS_RS_WEIGHT_PACK_ROWS != 0 || k % CUTLASS_RS_WEIGHT_PACK_COLS != 0 ||
      n > INT32_MAX || k > INT32_MAX)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(dst, 0, static_cast<size_t>(n * k / 2), st);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  // The packed order depends on the MMA's operand width only (bf16 and f16 give the same one: a
  // test of the crate holds it), so one instantiation serves both.
  pack_kernel<cutlass::bfloat16_t><<<blocks_for(n * k), kThreads, 0, st>>>(
      format, src, static_cast<uint32_t *>(dst), n, k, static_cast<uint32_t>(flip));
  return launch_error();
}

extern "C" int cutlass_rs_weight_unpack(const void *src, void *dst, int64_t n, int64_t k, void *stream) {
  if (src == nullptr || dst == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (n <= 0 || k <= 0 || n % CUTLASS_RS_WEIGHT_PACK_ROWS != 0 || k % CUTLASS_RS_WEIGHT_PACK_COLS != 0 ||
      n > INT32_MAX || k > INT32_MAX)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemsetAsync(dst, 0, static_cast<size_t>(n * k / 2), st);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  // One packed order for bf16 and f16 (cutlass_rs_weight_pack).
  unpack_kernel<cutlass::bfloat16_t><<<blocks_for(n * k), kThreads, 0, st>>>(
      static_cast<const uint32_t *>(src), static_cast<uint32_t *>(dst), n, k);
  return launch_error();
}

extern "C" int cutlass_rs_weight_zeros(int32_t format, const void *qzeros, const void *scales, void *zeros,
                                       int32_t dtype, int64_t groups, int64_t n, int32_t zero_offset,
                                       void *stream) {
  if (qzeros == nullptr || scales == nullptr || zeros == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (format < CUTLASS_RS_WEIGHT_FORMAT_PLAIN || format > CUTLASS_RS_WEIGHT_FORMAT_AWQ) return CUTLASS_RS_ERROR_INVALID;
  if (groups <= 0 || n <= 0 || (format != CUTLASS_RS_WEIGHT_FORMAT_PLAIN && n % 8 != 0))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  if (dtype == CUTLASS_RS_DTYPE_BF16) {
    zeros_kernel<<<blocks_for(groups * n), kThreads, 0, st>>>(format, qzeros, static_cast<const __nv_bfloat16 *>(scales),
                                                             static_cast<__nv_bfloat16 *>(zeros), groups, n, zero_offset);
  } else if (dtype == CUTLASS_RS_DTYPE_F16) {
    zeros_kernel<<<blocks_for(groups * n), kThreads, 0, st>>>(format, qzeros, static_cast<const __half *>(scales),
                                                             static_cast<__half *>(zeros), groups, n, zero_offset);
  } else {
    return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
  return launch_error();
}

extern "C" int cutlass_rs_weight_quantize(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                                          int64_t group_size, int32_t zero_points, void *q, void *scales,
                                          void *zp, void *stream) {
  if (w == nullptr || q == nullptr || scales == nullptr || (zero_points && zp == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (n <= 0 || k <= 0 || group_size <= 0 || group_size % 2 != 0 || k % group_size != 0 || ldw < k)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const int64_t total = n * (k / group_size);
  if (dtype == CUTLASS_RS_DTYPE_BF16) {
    quantize_kernel<<<blocks_for(total), kThreads, 0, st>>>(static_cast<const __nv_bfloat16 *>(w), ldw, n, k, group_size,
                                                           zero_points, static_cast<uint8_t *>(q),
                                                           static_cast<__nv_bfloat16 *>(scales), static_cast<uint8_t *>(zp));
  } else if (dtype == CUTLASS_RS_DTYPE_F16) {
    quantize_kernel<<<blocks_for(total), kThreads, 0, st>>>(static_cast<const __half *>(w), ldw, n, k, group_size,
                                                           zero_points, static_cast<uint8_t *>(q),
                                                           static_cast<__half *>(scales), static_cast<uint8_t *>(zp));
  } else {
    return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
  return launch_error();
}

extern "C" int cutlass_rs_weight_fp8_nan_rows(const void *q, int64_t n, int64_t k, int32_t dtype, void *scales,
                                              void *stream) {
  if (q == nullptr || scales == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (n <= 0 || k <= 0) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const unsigned blocks = static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16);
  if (dtype == CUTLASS_RS_DTYPE_BF16) {
    fp8_nan_rows_kernel<<<blocks, kFp8Threads, 0, st>>>(static_cast<const uint8_t *>(q), n, k,
                                                        static_cast<__nv_bfloat16 *>(scales));
  } else if (dtype == CUTLASS_RS_DTYPE_F16) {
    fp8_nan_rows_kernel<<<blocks, kFp8Threads, 0, st>>>(static_cast<const uint8_t *>(q), n, k,
                                                        static_cast<__half *>(scales));
  } else {
    return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
  return launch_error();
}

namespace {

template <PerChannel kFormat>
int quantize_per_channel(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k, void *q, void *scales,
                         void *stream) {
  if (w == nullptr || q == nullptr || scales == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (n <= 0 || k <= 0 || ldw < k) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  const unsigned blocks = static_cast<unsigned>(n < 65535 * 16 ? n : 65535 * 16);
  if (dtype == CUTLASS_RS_DTYPE_BF16) {
    quantize_row_kernel<__nv_bfloat16, kFormat><<<blocks, kFp8Threads, 0, st>>>(
        static_cast<const __nv_bfloat16 *>(w), ldw, n, k, static_cast<uint8_t *>(q),
        static_cast<__nv_bfloat16 *>(scales));
  } else if (dtype == CUTLASS_RS_DTYPE_F16) {
    quantize_row_kernel<__half, kFormat><<<blocks, kFp8Threads, 0, st>>>(
        static_cast<const __half *>(w), ldw, n, k, static_cast<uint8_t *>(q), static_cast<__half *>(scales));
  } else {
    return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
  return launch_error();
}

}  // namespace

extern "C" int cutlass_rs_weight_quantize_fp8(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                                              void *q, void *scales, void *stream) {
  return quantize_per_channel<PerChannel::kE4m3>(w, ldw, dtype, n, k, q, scales, stream);
}

extern "C" int cutlass_rs_weight_quantize_int8(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                                               void *q, void *scales, void *stream) {
  return quantize_per_channel<PerChannel::kS8>(w, ldw, dtype, n, k, q, scales, stream);
}
