// Part of cutlass-gemm-sys (csrc/cutlass_rs_gemv_fragments.cuh); not generated. The pieces the
// hand-written decode GEMVs share (the weight-only GEMV, cutlass_rs_weight_gemv.cu, and the FP8
// blockwise one, cutlass_rs_blockwise_gemv.cu): the m16n8k16 MMA, the exact conversion of four
// e4m3 bytes into 16-bit pairs, and a load that streams past L1.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace gemv
}  // namespace cutlass_rs
