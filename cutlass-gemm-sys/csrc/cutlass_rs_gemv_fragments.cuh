// Part of cutlass-gemm-sys (csrc/cutlass_rs_gemv_fragments.cuh); not generated. The pieces the
// hand-written decode GEMVs share (the weight-only GEMV, cutlass_rs_weight_gemv.cu, and the FP8
// blockwise one, cutlass_rs_blockwise_gemv.cu, and the 16-bit one, cutlass_rs_dense_gemv.cu): the
// m16n8k16 MMA, the exact conversion of four e4m3 bytes into 16-bit pairs, a load that streams
// past L1, the warps' sums of a block and the launch shape.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"

namespace cutlass_rs {
namespace gemv {

// d = a . b + c, m16n8k16, f32 accumulation.
template <class T>
__device__ inline void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1, const float (&c)[4]);
template <>
__device__ inline void mma<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                          const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}
template <>
__device__ inline void mma<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1,
                                   const float (&c)[4]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%11,%12,%13};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

// e4m3 in a 16-bit type: seven logic operations and shifts a word move its four e4m3 bytes into
// 16-bit patterns (sign in place, exponent and mantissa shifted right), reading 2^-120 (bf16) or
// 2^-8 (f16) times the e4m3 values, subnormals included; a multiplication by 2^120 (2^8) a pair
// makes them exact. e4m3's NaN bytes (0x7F, 0xFF) come out finite (480 and -480).
template <class T>
struct Fp8;
template <>
struct Fp8<__nv_bfloat16> {
  static constexpr int kShift = 4;                   // 8 exponent bits against e4m3's 4
  static constexpr uint32_t kRescale = 0x7B807B80u;  // 2^120, the exponent biases' difference
};
template <>
struct Fp8<__half> {
  static constexpr int kShift = 1;                   // 5 exponent bits against e4m3's 4
  static constexpr uint32_t kRescale = 0x5C005C00u;  // 2^8
};

// The four e4m3 values of a word (bytes b0 to b3) as the pairs (b0, b2) and (b1, b3) of T.
template <class T>
__device__ inline void e4m3_pairs(uint32_t q, uint32_t &even, uint32_t &odd) {
  constexpr uint32_t kSign = 0x80008000u, kBits = 0x7F007F00u;
  odd = (q & kSign) | ((q & kBits) >> Fp8<T>::kShift);
  q <<= 8;
  even = (q & kSign) | ((q & kBits) >> Fp8<T>::kShift);
  const uint32_t rescale = Fp8<T>::kRescale;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 k = *reinterpret_cast<const __nv_bfloat162 *>(&rescale);
    const __nv_bfloat162 e = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&even), k);
    const __nv_bfloat162 o = __hmul2(*reinterpret_cast<__nv_bfloat162 *>(&odd), k);
    even = *reinterpret_cast<const uint32_t *>(&e);
    odd = *reinterpret_cast<const uint32_t *>(&o);
  } else {
    const __half2 k = *reinterpret_cast<const __half2 *>(&rescale);
    const __half2 e = __hmul2(*reinterpret_cast<__half2 *>(&even), k);
    const __half2 o = __hmul2(*reinterpret_cast<__half2 *>(&odd), k);
    even = *reinterpret_cast<const uint32_t *>(&e);
    odd = *reinterpret_cast<const uint32_t *>(&o);
  }
}

// The four e4m3 values of a word as f16 pairs (b0, b2) and (b1, b3) holding 2^-8 times the values
// (e4m3_pairs without its rescaling multiplication: four logic operations a word; the e4m3
// subnormals become f16 subnormals, exact). Products of two such values are 2^-16 times the
// exact products, which an f32 sum holds exactly as well.
__device__ inline void e4m3_pairs_f16_scaled_down(uint32_t q, uint32_t &even, uint32_t &odd) {
  constexpr uint32_t kSign = 0x80008000u, kBits = 0x7F007F00u;
  odd = (q & kSign) | ((q & kBits) >> 1);
  q <<= 8;
  even = (q & kSign) | ((q & kBits) >> 1);
}

// 16 bytes the warp reads once: past L1.
__device__ inline uint4 load_streaming(const void *at) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at));
  return v;
}

// The warps' sums of a block's 16-row slice (the accumulators of an m16n8k16 MMA: element e of
// lane l in token group t is row (l / 4) + 8 (e / 2) of the slice, token 8 t + 2 (l % 4) + e % 2),
// added in warp order in shared memory (kTokenGroups . 512 floats a warp; the result does not
// depend on timing), then handed to epilogue(row in the slice, token, sum) by the block's threads.
template <int kTokenGroups, class Epilogue>
__device__ inline void sum_warps(const float (&acc)[kTokenGroups][4], float *partial, int warp, int lane, int warps,
                                 Epilogue epilogue) {
  constexpr int kValues = kTokenGroups * 4 * 32;
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[warp * kValues + (t * 4 + e) * 32 + lane] = acc[t][e];
  __syncthreads();
  for (int i = threadIdx.x; i < kValues; i += blockDim.x) {
    float v = 0.f;
    for (int u = 0; u < warps; ++u) v += partial[u * kValues + i];
    const int l = i & 31, e = (i >> 5) & 3, t = i >> 7;
    epilogue((l >> 2) + 8 * (e >> 1), t * 8 + (l & 3) * 2 + (e & 1), v);
  }
}

// The most dynamic shared memory a block may opt in to on a device, asked once per device.
inline size_t max_shared(int device) {
  static std::atomic<int> cache[64];
  int bytes = device >= 0 && device < 64 ? cache[device].load(std::memory_order_relaxed) : 0;
  if (bytes == 0) {
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess || bytes <= 0)
      bytes = 48 * 1024;
    if (device >= 0 && device < 64) cache[device].store(bytes, std::memory_order_relaxed);
  }
  return static_cast<size_t>(bytes);
}

// Warps an SM holds of a kernel, by its registers (allocated per warp in units of 256), asked once
// per kernel.
template <class Kernel>
int resident_warps(Kernel kernel) {
  static std::atomic<int> cache{0};
  int warps = cache.load(std::memory_order_relaxed);
  if (warps == 0) {
    cudaFuncAttributes attributes{};
    const int regs = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess ? attributes.numRegs : 128;
    warps = 65536 / (((regs > 0 ? regs : 1) * 32 + 255) / 256 * 256);
    if (warps > 64) warps = 64;
    if (warps < 1) warps = 1;
    cache.store(warps, std::memory_order_relaxed);
  }
  return warps;
}

// Warps a block for a GEMV over `blocks` blocks of one 16-row slice whose warps share `runs` runs
// of k: the grid in one wave (every block resident at once: a second block on a few SMs doubles
// their share) at up to `target` warps an SM and as many as the kernel's registers allow
// (`resident`), the warps a block (1 to kMaxWarps, at most the runs) an even share of them; with
// `balanced`, the largest divisor of the runs at or below that unless it is less than half of it
// (a warp with one run more than the others keeps the block waiting).
inline int64_t gemv_warps(int64_t blocks, int64_t runs, int64_t sms, int64_t target, int64_t resident, bool balanced,
                          int64_t max_warps) {
  const int64_t per_sm = target < resident ? target : resident;
  int64_t warps = per_sm / ((blocks + sms - 1) / sms);
  if (warps > max_warps) warps = max_warps;
  if (warps > runs) warps = runs;
  if (warps < 1) warps = 1;
  if (balanced) {
    int64_t divisor = warps;
    while (runs % divisor != 0) --divisor;
    if (2 * divisor >= warps) warps = divisor;
  }
  return warps;
}

// A 16-bit output type to and from f32.
template <class T>
struct Convert;
template <>
struct Convert<__nv_bfloat16> {
  static __device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Convert<__half> {
  static __device__ float to_float(__half v) { return __half2float(v); }
  static __device__ __half from_float(float v) { return __float2half_rn(v); }
};

// The GEMVs' epilogue for one output: D[token][row] = alpha . v + beta . C[token][row] (C read only
// when beta is not 0), for tokens below m. P holds m, alpha, beta, c, ldc, d, ldd.
template <class T, class P>
__device__ inline void write_output(const P &p, int row, int token, float v) {
  if (token >= p.m) return;
  v *= p.alpha;
  if (p.beta != 0.f) v += p.beta * Convert<T>::to_float(p.c[int64_t(token) * p.ldc + row]);
  p.d[int64_t(token) * p.ldd + row] = Convert<T>::from_float(v);
}

// A CUDA runtime error as a C status.
inline int gemv_status(cudaError_t e) {
  return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
}

inline bool aligned(const void *p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Launches a GEMV kernel of one 16-row slice a block over `blocks` blocks whose warps share `runs`
// runs of k, shaped by gemv_warps (at up to `target` warps an SM), each warp with `per_warp` bytes
// of dynamic shared memory (opting in beyond the default 48 KB).
template <class Params>
int launch_gemv(void (*kernel)(Params), int64_t blocks, int64_t runs, int64_t sms, int64_t target, bool balanced,
                size_t per_warp, int device, cudaStream_t stream, const Params &p) {
  constexpr int64_t kMaxWarps = 16;
  int64_t warps = gemv_warps(blocks, runs, sms, target, resident_warps(kernel), balanced, kMaxWarps);
  while (warps > 1 && size_t(warps) * per_warp > max_shared(device)) --warps;
  const size_t shared = size_t(warps) * per_warp;
  if (shared > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // not left for the next launch's check
      return gemv_status(e);
    }
  }
  kernel<<<dim3(static_cast<unsigned>(blocks)), dim3(static_cast<unsigned>(warps) * 32), shared, stream>>>(p);
  return gemv_status(cudaGetLastError());
}

// launch(std::integral_constant<int, G>) for the G = ceil(m / 8) groups of 8 tokens (1 to 4).
template <class Launch>
int by_token_groups(int64_t m, Launch launch) {
  switch ((m + 7) / 8) {
    case 1:
      return launch(std::integral_constant<int, 1>{});
    case 2:
      return launch(std::integral_constant<int, 2>{});
    case 3:
      return launch(std::integral_constant<int, 3>{});
    default:
      return launch(std::integral_constant<int, 4>{});
  }
}

}  // namespace gemv
}  // namespace cutlass_rs
