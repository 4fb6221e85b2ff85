// Round-to-nearest-even encoders for the formats Hopper has no conversion instruction for (FP6
// e2m3/e3m2, FP4 e2m1), and the packing of their codes. Hand-written, not generated. Included by
// quantize.cu (device) and by tests/oracle/encoders.cu (host), which checks every 16-bit input and
// a million f32 inputs against the crate's host codec (cutlass_gemm::numeric::FloatFormat::encode_rne).
//
// The rounding is done by the floating-point adder, not by a float-to-int conversion: for a value
// a >= 0 of binade e (clamped to the format's smallest normal binade), adding M = 2^(e - man + P)
// (P = the significand bits of the arithmetic format) leaves round(a / 2^(e - man)) in the low bits
// of a + M, ties to even, because the ulp of M is exactly the format's quantum 2^(e - man). The code
// is then that integer plus the binade's offset, with no branch. Two variants:
// - encode_f32: one f32 value (P = 23), any input; NaN encodes as +max, like the host codec.
// - encode_x2: two values in one 32-bit register as bf16x2 or f16x2 (P = 7 or 10), every step done
//   on both lanes by one instruction. Exact when the 16-bit values are the values to encode (MX
//   scaling of bf16 and f16 inputs by a power of two is exact in 16 bits); the lanes must not be
//   NaN (callers encode NaN blocks separately).
#pragma once

#include <cstdint>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace cutlass_rs {

__host__ __device__ __forceinline__ uint32_t bits_of(float x) {
#ifdef __CUDA_ARCH__
  return __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
#endif
}

__host__ __device__ __forceinline__ float float_of(uint32_t u) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(u);
#else
  float x;
  std::memcpy(&x, &u, 4);
  return x;
#endif
}

template <class H2>
__host__ __device__ __forceinline__ uint32_t bits_of(H2 x) {
  uint32_t u;
  static_assert(sizeof(H2) == 4, "a pair of 16-bit values");
  std::memcpy(&u, &x, 4);
  return u;
}

template <class H2>
__host__ __device__ __forceinline__ H2 pair_of(uint32_t u) {
  H2 x;
  std::memcpy(&x, &u, 4);
  return x;
}

// A signed format of kBits bits without infinities or NaN: kMan mantissa bits, bias kBias,
// subnormals, saturating.
template <int kMan_, int kBias_, int kBits_>
struct SmallFloat {
  static constexpr int kMan = kMan_, kBias = kBias_, kBits = kBits_;
  static constexpr int kEmin = 1 - kBias;  // binade of the smallest normal
  static constexpr int kEmax = (1 << (kBits - 1 - kMan)) - 1 - kBias;
  static constexpr uint32_t kMaxCode = (1u << (kBits - 1)) - 1;
  // f32 bits of the largest value.
  static constexpr uint32_t kMaxF32 = (uint32_t(kEmax + 127) << 23) | (((1u << kMan) - 1) << (23 - kMan));
};
using FmtE2M1 = SmallFloat<1, 1, 4>;
using FmtE2M3 = SmallFloat<3, 1, 6>;
using FmtE3M2 = SmallFloat<2, 3, 6>;

// One f32 value; NaN gives +max when kMayBeNan (otherwise the caller guarantees no NaN).
template <class F, bool kMayBeNan = true>
__host__ __device__ __forceinline__ uint32_t encode_f32(float y) {
  const uint32_t yb = bits_of(y);
  const float y_abs = fabsf(y);
  const float a = y_abs < float_of(F::kMaxF32) ? y_abs : float_of(F::kMaxF32);  // saturates; NaN gives max
  uint32_t eo = bits_of(a) & 0x7f800000u;                  // 2^e
  const uint32_t lo = uint32_t(F::kEmin + 127) << 23;
  eo = eo > lo ? eo : lo;                                  // 2^max(e, emin)
  const uint32_t m = eo + (uint32_t(23 - F::kMan) << 23);  // ulp(M) = quantum
  const uint32_t s = bits_of(a + float_of(m));             // RNE by the adder
  const uint32_t code = s - m + (eo >> (23 - F::kMan)) - (uint32_t(127 + F::kEmin) << F::kMan);
  uint32_t sign = (yb >> 31) << (F::kBits - 1);
  if (kMayBeNan && y != y) sign = 0;
  return code | sign;
}

template <class H2>
struct Pair16;
template <>
struct Pair16<__nv_bfloat162> {
  static constexpr int P = 7, Bias = 127;
  static constexpr uint32_t kExpMask = 0x7f807f80u;
};
template <>
struct Pair16<__half2> {
  static constexpr int P = 10, Bias = 15;
  static constexpr uint32_t kExpMask = 0x7c007c00u;
};

// Two values (H2 = __nv_bfloat162 or __half2, as raw bits): codes at bits [0, kBits) and
// [16, 16 + kBits). Neither lane may be NaN.
template <class F, class H2>
__host__ __device__ __forceinline__ uint32_t encode_x2(uint32_t yb) {
  using T = Pair16<H2>;
  constexpr uint32_t kLanes = 0x00010001u;
  static_assert(F::kEmax + T::Bias > 0 && F::kEmin + T::Bias > 0, "the format's range is normal in 16 bits");
  constexpr uint32_t kMax16 = (uint32_t(F::kEmax + T::Bias) << T::P) | (((1u << F::kMan) - 1) << (T::P - F::kMan));
  constexpr uint32_t kMin16 = uint32_t(F::kEmin + T::Bias) << T::P;
  const H2 a = __hmin2(__habs2(pair_of<H2>(yb)), pair_of<H2>(kMax16 * kLanes));
  const uint32_t e_raw = bits_of(a) & T::kExpMask;
  const uint32_t eo = bits_of(__hmax2(pair_of<H2>(e_raw), pair_of<H2>(kMin16 * kLanes)));
  constexpr uint32_t kM = (uint32_t(T::P - F::kMan) << T::P) * kLanes;  // M = eo + kM
  constexpr uint32_t kOffset = (uint32_t(T::Bias + F::kEmin) << F::kMan) * kLanes;
  const uint32_t s = bits_of(__hadd2(a, pair_of<H2>(eo + kM)));
  // code = (s - M) + (eo >> (P - man)) - offset per lane: s - M >= 0 and the shifted binade is at
  // least the offset, so no borrow crosses lanes (the constants are folded into one subtraction);
  // the shift moves no bit of the high lane below bit 16.
  const uint32_t code = s - eo - (kM + kOffset) + (eo >> (T::P - F::kMan));
  return code | ((yb >> (16 - F::kBits)) & ((1u << (F::kBits - 1)) * kLanes));
}

// Two f32 values as an f16x2 (y_lo in the low lane) rounded to odd: truncated, with the lowest
// kept bit set when any dropped bit was. A value rounded to odd with at least two more significant
// bits than a format rounds to nearest-even in that format exactly as the original does, and f16
// keeps 11 bits where FP6/FP4 have at most 4: so encode_x2<F, __half2> of the result encodes y_lo
// and y_hi exactly (for |y| >= 2^-14, f16's smallest normal; anything smaller encodes as a signed
// zero either way, and anything beyond 65504 truncates to 65504 and saturates). NaN stays NaN, which
// encode_x2 does not take: callers route NaN elsewhere. This is how values that are not exact in 16
// bits (f32 inputs, NVFP4's non-power-of-two scaling) use the two-lane encoder.
__host__ __device__ __forceinline__ uint32_t f16x2_round_odd(float y_lo, float y_hi) {
  // Bit 13 of an f32 is the f16 mantissa's last bit: OR into it a carry out of the 13 bits below.
  const auto sticky = [](float y) {
    const uint32_t b = bits_of(y);
    return float_of(((b + 0x1fffu) & 0x2000u) | b);
  };
  const float lo = sticky(y_lo), hi = sticky(y_hi);
#ifdef __CUDA_ARCH__
  uint32_t d;
  asm("cvt.rz.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return bits_of(__halves2half2(__float2half_rz(lo), __float2half_rz(hi)));
#endif
}

// Eight FP4 codes held as four pairs (encode_x2's layout) to the packed stream's 32 bits
// (element j at bits [4j, 4j + 4)).
__host__ __device__ __forceinline__ uint32_t pack_fp4_pairs(const uint32_t (&c)[4]) {
  uint32_t w = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) w |= ((c[i] | (c[i] >> 12)) & 0xffu) << (8 * i);
  return w;
}

// Eight FP4 codes held as four pairs of elements (j, j + 4) (pair j: element j in the low lane,
// element j + 4 in the high lane) to the packed stream's 32 bits: the pairs only shift and merge.
__host__ __device__ __forceinline__ uint32_t pack_fp4_spread(const uint32_t (&c)[4]) {
  return c[0] | (c[1] << 4) | (c[2] << 8) | (c[3] << 12);
}

// Eight FP6 codes held as four pairs to the packed stream's 48 bits (element j at [6j, 6j + 6)).
__host__ __device__ __forceinline__ uint64_t pack_fp6_pairs(const uint32_t (&c)[4]) {
  uint64_t w = 0;
#pragma unroll
  for (int i = 0; i < 4; ++i) w |= uint64_t((c[i] | (c[i] >> 10)) & 0xfffu) << (12 * i);
  return w;
}

}  // namespace cutlass_rs
