// Quantization kernels that produce CUTLASS-ready operands. Hand-written, not generated; compiled by
// cutlass-gemm-sys's build script (same nvcc, flags and object cache as the GEMM kernels) for every
// selected architecture.
//
// Every kernel reproduces the host quantizers of `cutlass_gemm::quantize::host` bit for bit: the same f32
// operations in the same order, CUDA's own conversion functions for FP8 and ue4m3 (which the host
// code matches), and for FP6/FP4 the encoders of narrow_encode.cuh (which the host code matches on
// every input tested; both checks are in tests/format_crosscheck.rs).
//
// Matrices are row-major [rows, k] with k contiguous (A as M x K, B as N x K). Packed FP4/FP6 output
// is the dense little-endian bit stream (element i at bits [i*b, (i+1)*b)). Scale factors of MX and
// NVFP4 go straight into the Sm1xxBlockScaledConfig layout (batch 1); FP8 blockwise scales are a
// plain row-major [ceil(rows/br), ceil(cols/bc)] f32 matrix.

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp4.h>
#include <cuda_fp6.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"
#include "narrow_encode.cuh"

namespace {

constexpr int kThreads = 256;

template <class T> __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

// Loads elements [i0, i0 + 8) of a row (those < end; the rest are 0). Vectorized when aligned.
template <class T>
__device__ __forceinline__ void load8(const T *row, int64_t i0, int64_t end, float (&v)[8]) {
  const T *p = row + i0;
  if (i0 + 8 <= end && (reinterpret_cast<uintptr_t>(p) % 16) == 0) {
    if constexpr (sizeof(T) == 4) {
      float4 a = reinterpret_cast<const float4 *>(p)[0];
      float4 b = reinterpret_cast<const float4 *>(p)[1];
      v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
    } else {
      uint4 raw = *reinterpret_cast<const uint4 *>(p);
      const T *e = reinterpret_cast<const T *>(&raw);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = to_f32(e[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = (i0 + j < end) ? to_f32(p[j]) : 0.0f;
  }
}

// Eight consecutive elements as loaded: kept in their own type (16 or 32 bytes of registers) and
// widened to f32 where used, so more rows fit in flight per thread.
template <class T>
union Raw8 {
  uint4 u[sizeof(T) * 8 / 16];
  T e[8];
};

template <class T>
__device__ __forceinline__ void load_raw8(const T *row, int64_t i0, int64_t end, Raw8<T> &r) {
  const T *p = row + i0;
  if (i0 + 8 <= end && (reinterpret_cast<uintptr_t>(p) % 16) == 0) {
#pragma unroll
    for (int w = 0; w < int(sizeof(T) * 8 / 16); ++w) r.u[w] = reinterpret_cast<const uint4 *>(p)[w];
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) r.e[j] = (i0 + j < end) ? p[j] : T(0.0f);
  }
}

// max with NaN propagation (the MX rule: a NaN anywhere poisons the block).
__device__ __forceinline__ float max_nan(float a, float b) { return (a != a || b != b) ? __int_as_float(0x7fffffff) : fmaxf(a, b); }

// Reduces over groups of `width` consecutive lanes.
template <bool kNan>
__device__ __forceinline__ float group_max(float v, int width) {
  for (int o = width / 2; o > 0; o /= 2) {
    float other = __shfl_xor_sync(0xffffffffu, v, o);
    v = kNan ? max_nan(v, other) : fmaxf(v, other);
  }
  return v;
}

// Sm1xxBlockScaledConfig offset of scale factor (row, j) (batch 0).
__device__ __forceinline__ int64_t sf_offset(int64_t row, int64_t j, int64_t k_blocks) {
  const uint64_t r = uint64_t(row), c = uint64_t(j);  // non-negative: unsigned shifts and masks
  const uint64_t within = (r % 32) * 16 + ((r / 32) % 4) * 4 + (c % 4);
  return int64_t(((r / 128) * uint64_t(k_blocks) + c / 4) * 512 + within);
}

// The pointer, kept in registers: the compiler would otherwise recompute the address for every
// row inside the (predicated) store.
template <class P>
__device__ __forceinline__ P *pinned(P *p) {
  asm volatile("" : "+l"(p));
  return p;
}

enum ElemKind { kE4M3 = CUTLASS_RS_DTYPE_E4M3, kE5M2 = CUTLASS_RS_DTYPE_E5M2, kE2M3 = CUTLASS_RS_DTYPE_E2M3,
                kE3M2 = CUTLASS_RS_DTYPE_E3M2, kE2M1 = CUTLASS_RS_DTYPE_E2M1 };

template <int kElem> struct Elem;
template <> struct Elem<kE4M3> { static constexpr int bits = 8, emax = 8;
  __device__ static uint8_t cvt(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3); } };
template <> struct Elem<kE5M2> { static constexpr int bits = 8, emax = 15;
  __device__ static uint8_t cvt(float x) { return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2); } };
// FP6/FP4: RNE by the floating-point adder (narrow_encode.cuh); sm_90 has no conversion
// instruction for these formats and CUDA's emulation is slow. Fmt is the format for the two-lane
// encoder.
template <> struct Elem<kE2M3> { static constexpr int bits = 6, emax = 2; using Fmt = cutlass_rs::FmtE2M3;
  __device__ static uint8_t cvt(float x) { return cutlass_rs::encode_f32<Fmt>(x); } };
template <> struct Elem<kE3M2> { static constexpr int bits = 6, emax = 4; using Fmt = cutlass_rs::FmtE3M2;
  __device__ static uint8_t cvt(float x) { return cutlass_rs::encode_f32<Fmt>(x); } };
template <> struct Elem<kE2M1> { static constexpr int bits = 4, emax = 2; using Fmt = cutlass_rs::FmtE2M1;
  __device__ static uint8_t cvt(float x) { return cutlass_rs::encode_f32<Fmt>(x); } };

// The packed-pair type of a 16-bit input type.
template <class T> struct PairOf;
template <> struct PairOf<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct PairOf<__half> { using type = __half2; };

// Stores the packed codes of one full run of 8 sub-byte elements: one 32-bit store for FP4 (4
// bytes), three 16-bit stores for FP6 (6 bytes, 2-byte aligned since the run starts at a multiple
// of 8 elements).
// `aligned`: dst is 4-byte (FP4) or 2-byte (FP6) aligned; the kernels pass a flag that holds for
// every row (so it costs no per-row address test).
template <int kBits>
__device__ __forceinline__ void store_packed8_at(uint8_t *dst, uint64_t w, bool aligned) {
  if constexpr (kBits == 4) {
    if (aligned) {
      *reinterpret_cast<uint32_t *>(dst) = uint32_t(w);
    } else {
#pragma unroll
      for (int b = 0; b < 4; ++b) dst[b] = uint8_t(w >> (8 * b));
    }
  } else {
    if (aligned) {
      uint16_t *d16 = reinterpret_cast<uint16_t *>(dst);
      d16[0] = uint16_t(w);
      d16[1] = uint16_t(w >> 16);
      d16[2] = uint16_t(w >> 32);
    } else {
#pragma unroll
      for (int b = 0; b < 6; ++b) dst[b] = uint8_t(w >> (8 * b));
    }
  }
}


// MX FP6/FP4 of one full run of 8 elements scaled by inv = 2^-e. 16-bit inputs: the scaled
// values are exact in 16 bits (a power-of-two scaling that cannot overflow, since |x| * inv <
// 2^(emax + 1); what underflows is far below the format's smallest tie), so they are encoded two per
// instruction; bf16 is even scaled in bf16x2. f32 inputs: exact f32 products rounded to odd into
// f16x2 pairs, then the same two-lane encoder.
template <class E, class T>
__device__ __forceinline__ uint64_t mx_sub8(const Raw8<T> &v, float inv) {
  // FP4 encodes pairs of elements (j, j + 4), which pack by shifts alone (pack_fp4_spread); FP6
  // encodes adjacent pairs (pack_fp6_pairs).
  constexpr bool kSpread = E::bits == 4;
  uint32_t c[4];
  if constexpr (sizeof(T) == 2) {
    using H2 = typename PairOf<T>::type;
    const uint32_t *w = reinterpret_cast<const uint32_t *>(v.u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t y;
      if constexpr (std::is_same<T, __nv_bfloat16>::value) {
        // Pair i: elements (i, i + 4) picked from the loaded words, or the word as loaded.
        const uint32_t x2 = kSpread ? __byte_perm(w[i / 2], w[2 + i / 2], (i % 2) ? 0x7632 : 0x5410) : w[i];
        // 2^-e as a bf16 (exact: the top half of the f32, subnormal 2^-127 included).
        const uint32_t inv2 = (__float_as_uint(inv) >> 16) * 0x00010001u;
        y = cutlass_rs::bits_of(__hmul2(cutlass_rs::pair_of<H2>(x2), cutlass_rs::pair_of<H2>(inv2)));
      } else {
        const int j0 = kSpread ? i : 2 * i, j1 = kSpread ? i + 4 : 2 * i + 1;
        y = cutlass_rs::bits_of(__floats2half2_rn(to_f32(v.e[j0]) * inv, to_f32(v.e[j1]) * inv));
      }
      c[i] = cutlass_rs::encode_x2<typename E::Fmt, H2>(y);
    }
  } else {
    // f32: exact f32 products, rounded to odd into f16x2 (narrow_encode.cuh).
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int j0 = kSpread ? i : 2 * i, j1 = kSpread ? i + 4 : 2 * i + 1;
      c[i] = cutlass_rs::encode_x2<typename E::Fmt, __half2>(cutlass_rs::f16x2_round_odd(v.e[j0] * inv, v.e[j1] * inv));
    }
  }
  if constexpr (kSpread) return cutlass_rs::pack_fp4_spread(c);
  else return cutlass_rs::pack_fp6_pairs(c);
}

// NVFP4 of one full run of 8 without NaN: f32 products (the scale is not a power of two), rounded
// to odd into f16x2 pairs of elements (j, j + 4), encoded two per instruction and merged by shifts.
template <class T>
__device__ __forceinline__ uint32_t nv_sub8(const Raw8<T> &v, float inv) {
  uint32_t c[4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
    c[j] = cutlass_rs::encode_x2<cutlass_rs::FmtE2M1, __half2>(
        cutlass_rs::f16x2_round_odd(to_f32(v.e[j]) * inv, to_f32(v.e[j + 4]) * inv));
  return cutlass_rs::pack_fp4_spread(c);
}

// max |x| of a run of 8 as f32 bits, NaN above infinity (the MX rule: a NaN poisons the block):
// an integer max of |bit patterns|, two 16-bit lanes per instruction for 16-bit inputs.
template <class T>
__device__ __forceinline__ uint32_t absmax_bits8(const Raw8<T> &v) {
  if constexpr (sizeof(T) == 2) {
    const uint32_t *w = reinterpret_cast<const uint32_t *>(v.u);
    constexpr uint32_t kAbs = 0x7fff7fffu;
    uint32_t m = __vimax3_u16x2(w[0] & kAbs, w[1] & kAbs, w[2] & kAbs);
    m = __vmaxu2(m, w[3] & kAbs);
    const uint32_t m16 = max(m & 0xffffu, m >> 16);
    if constexpr (std::is_same<T, __nv_bfloat16>::value) return m16 << 16;
    else return __float_as_uint(__half2float(__ushort_as_half(uint16_t(m16))));
  } else {
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) m = max(m, __float_as_uint(v.e[j]) & 0x7fffffffu);
    return m;
  }
}

// max |x| of two runs of 8 as f32 bits, NaN above infinity: for 16-bit inputs a NaN-propagating
// float max over pairs (|x| ordered as floats is ordered as bits; any NaN gives a NaN, whose bits
// exceed infinity's), else integer max of |bits|.
template <class T>
__device__ __forceinline__ uint32_t absmax_bits16(const Raw8<T> &a, const Raw8<T> &b) {
  if constexpr (sizeof(T) == 2) {
    using H2 = typename PairOf<T>::type;
    const uint32_t *wa = reinterpret_cast<const uint32_t *>(a.u);
    const uint32_t *wb = reinterpret_cast<const uint32_t *>(b.u);
    H2 m = __habs2(cutlass_rs::pair_of<H2>(wa[0]));
#pragma unroll
    for (int i = 1; i < 4; ++i) m = __hmax2_nan(m, __habs2(cutlass_rs::pair_of<H2>(wa[i])));
#pragma unroll
    for (int i = 0; i < 4; ++i) m = __hmax2_nan(m, __habs2(cutlass_rs::pair_of<H2>(wb[i])));
    const uint32_t mb = cutlass_rs::bits_of(m);
    if constexpr (std::is_same<T, __nv_bfloat16>::value) {
      return max(mb << 16, mb & 0xffff0000u);
    } else {
      const uint32_t lo = __float_as_uint(__half2float(__ushort_as_half(uint16_t(mb))));
      const uint32_t hi = __float_as_uint(__half2float(__ushort_as_half(uint16_t(mb >> 16))));
      return max(lo & 0x7fffffffu, hi & 0x7fffffffu);
    }
  } else {
    return max(absmax_bits8(a), absmax_bits8(b));
  }
}

// max |x| of a run of 8, NaN ignored (fmaxf), two lanes per instruction for 16-bit inputs.
template <class T>
__device__ __forceinline__ float absmax8(const Raw8<T> &v) {
  if constexpr (sizeof(T) == 2) {
    using H2 = typename PairOf<T>::type;
    const uint32_t *w = reinterpret_cast<const uint32_t *>(v.u);
    H2 m = cutlass_rs::pair_of<H2>(0u);  // NaN lanes never win against it
#pragma unroll
    for (int i = 0; i < 4; ++i) m = __hmax2(m, __habs2(cutlass_rs::pair_of<H2>(w[i])));
    return fmaxf(__low2float(m), __high2float(m));
  } else {
    float m = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(v.e[j]));
    return m;
  }
}

// Writes n (<= 8, a multiple of 8/bits' packing unit) codes of element index i0 of the packed stream.
template <int kBits>
__device__ __forceinline__ void store_codes(uint8_t *out, int64_t i0, const uint8_t (&c)[8], int n) {
  if constexpr (kBits == 8) {
    if (n == 8 && (reinterpret_cast<uintptr_t>(out + i0) % 8) == 0) {
      uint2 w;
      w.x = c[0] | c[1] << 8 | c[2] << 16 | uint32_t(c[3]) << 24;
      w.y = c[4] | c[5] << 8 | c[6] << 16 | uint32_t(c[7]) << 24;
      *reinterpret_cast<uint2 *>(out + i0) = w;
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j)
        if (j < n) out[i0 + j] = c[j];
    }
  } else {
    // i0 is a multiple of 8, so the run starts on a byte boundary; n is even (FP4) or a multiple of
    // 4 (FP6), so it ends on one.
    uint64_t stream = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) stream |= uint64_t(c[j]) << (kBits * j);
    int64_t byte0 = i0 * kBits / 8;
    uint8_t *dst = out + byte0;
    if (n == 8 && kBits == 4 && (reinterpret_cast<uintptr_t>(dst) % 4) == 0) {
      *reinterpret_cast<uint32_t *>(dst) = uint32_t(stream);
    } else if (n == 8 && kBits == 6 && (reinterpret_cast<uintptr_t>(dst) % 2) == 0) {
      uint16_t *d16 = reinterpret_cast<uint16_t *>(dst);
      d16[0] = uint16_t(stream);
      d16[1] = uint16_t(stream >> 16);
      d16[2] = uint16_t(stream >> 32);
    } else {
      int nbytes = n * kBits / 8;
#pragma unroll
      for (int b = 0; b < 6; ++b)
        if (b < nbytes) dst[b] = uint8_t(stream >> (8 * b));
    }
  }
}

// Stores two consecutive runs of 8 sub-byte elements (w0 then w1, each as store_packed8_at takes
// them): one 64-bit store for FP4 (8 bytes) or three 32-bit stores for FP6 (12 bytes) when
// `wide_aligned` (dst 8- or 4-byte aligned, for every row), so that a warp writes whole
// contiguous words; otherwise two store_packed8_at.
template <int kBits>
__device__ __forceinline__ void store_packed16_at(uint8_t *dst, uint64_t w0, uint64_t w1, bool wide_aligned,
                                                  bool aligned) {
  if (wide_aligned) {
    if constexpr (kBits == 4) {
      *reinterpret_cast<uint2 *>(dst) = make_uint2(uint32_t(w0), uint32_t(w1));
    } else {
      uint32_t *d32 = reinterpret_cast<uint32_t *>(dst);
      d32[0] = uint32_t(w0);
      d32[1] = uint32_t(w0 >> 32) | uint32_t(w1 << 16);
      d32[2] = uint32_t(w1 >> 16);
    }
  } else {
    store_packed8_at<kBits>(dst, w0, aligned);
    store_packed8_at<kBits>(dst + kBits, w1, aligned);  // 8 elements = kBits bytes
  }
}

// FP8(v[j] * inv) for 8 values, two per conversion instruction, packed into two 32-bit words.
template <class T>
__device__ __forceinline__ uint2 fp8_pack8(const Raw8<T> &r, float inv, __nv_fp8_interpretation_t kind) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 8; j += 2)
    w[j / 2] = __nv_cvt_float2_to_fp8x2(make_float2(to_f32(r.e[j]) * inv, to_f32(r.e[j + 1]) * inv), __NV_SATFINITE, kind);
  return make_uint2(w[0] | (w[1] << 16), w[2] | (w[3] << 16));
}

// Stores 8 FP8 codes (or the first n) at out + off.
__device__ __forceinline__ void store_fp8(uint8_t *out, int64_t off, uint2 w, int n) {
  if (n == 8 && (reinterpret_cast<uintptr_t>(out + off) % 8) == 0) {
    *reinterpret_cast<uint2 *>(out + off) = w;
  } else {
    const uint64_t all = uint64_t(w.x) | uint64_t(w.y) << 32;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) out[off + j] = uint8_t(all >> (8 * j));
  }
}

// Rows per thread in the row kernels: all their loads are issued before any arithmetic, so each
// thread keeps 8 x 16 bytes (16-bit inputs) or 4 x 32 bytes (f32) in flight.
template <class T>
__host__ __device__ constexpr int rows_per_thread() {
  return sizeof(T) == 2 ? 8 : 4;
}
constexpr int kRows = 8;  // the largest rows_per_thread (grid sizing)

// Loads chunk i0..i0+8 of rows r0..r0+R (zeros past the matrix or for dead threads): all loads are
// issued before any arithmetic.
template <int R, class T>
__device__ __forceinline__ void load_rows(const T *x, int64_t rows, int64_t k, int64_t r0, int64_t i0, bool live,
                                          Raw8<T> (&v)[R]) {
#pragma unroll
  for (int q = 0; q < R; ++q) {
    if (live && r0 + q < rows) {
      load_raw8(x + (r0 + q) * k, i0, k, v[q]);
    } else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[q].e[j] = T(0.0f);
    }
  }
}

// Runs of 8 elements per thread per row of the MX kernel: FP8 elements 1 (four threads per scale
// block), FP6/FP4 elements 2 (two threads per block; the per-row work — amax, scale, its store — is
// then shared by 16 elements, which the sub-byte encoders need, being compute-bound on Hopper).
template <int kElem>
constexpr int mx_runs() {
  return (kElem == kE4M3 || kElem == kE5M2) ? 1 : 2;
}

// MX block quantization along k (ue8m0 scale per 32 elements): 8 * mx_runs elements per thread
// per row, rows_per_thread / mx_runs rows; the threads of one scale block are consecutive lanes.
// Grid: x covers a row's threads (256 is a multiple of 4, so no scale block straddles two CTAs),
// y covers groups of rows (striding past gridDim.y). Registers are capped so that 3 CTAs (4 for
// FP8 elements, which fit 64 registers without spilling) share an SM: a memory-bound kernel wants
// loads in flight.
template <class T, int kElem>
__global__ void __launch_bounds__(kThreads, mx_runs<kElem>() == 1 ? 4 : 3)
    block_quant_kernel(const T *x, int64_t rows, int64_t k, uint8_t *out, uint8_t *sf) {
  using E = Elem<kElem>;
  constexpr int kRuns = mx_runs<kElem>();
  constexpr int kPer = 8 * kRuns;       // elements per thread per row
  constexpr int kPerBlock = 32 / kPer;  // threads per scale block
  constexpr int R = rows_per_thread<T>() / kRuns;
  const int64_t blocks_per_row = (k + 31) / 32;
  const int64_t threads_per_row = blocks_per_row * kPerBlock;
  const int64_t k_blocks = (blocks_per_row + 3) / 4;
  const int64_t chunk_all = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = chunk_all < threads_per_row;
  const int64_t chunk = live ? chunk_all : 0;
  const int64_t i0 = chunk * kPer;
  const int n = live ? int((k - i0) < kPer ? (k - i0) : kPer) : 0;
  const int64_t block = i0 / 32;
  const bool sf_writer = chunk % kPerBlock == 0;
  // Packed rows are k * bits / 8 bytes (k is even for FP4, a multiple of 4 for FP6); a run of 8
  // starts at a multiple of 4 (FP4) or 2 (FP6) bytes into its row.
  const int64_t row_bytes = (k * E::bits) >> 3;
  const bool rows_aligned = row_bytes % (E::bits == 4 ? 4 : 2) == 0 &&
                            reinterpret_cast<uintptr_t>(out) % (E::bits == 4 ? 4 : 2) == 0;
  // Two runs (16 elements) start at a multiple of 8 (FP4) or 12 (FP6) bytes into their row.
  constexpr int kWide = E::bits == 4 ? 8 : 4;
  const bool rows_wide = row_bytes % kWide == 0 && reinterpret_cast<uintptr_t>(out) % kWide == 0;
  for (int64_t r0 = int64_t(blockIdx.y) * R; r0 < rows; r0 += int64_t(gridDim.y) * R) {
    Raw8<T> v[R][kRuns];
#pragma unroll
    for (int h = 0; h < kRuns; ++h) {
      Raw8<T> part[R];
      load_rows<R>(x, rows, k, r0, i0 + 8 * h, live && 8 * h < n, part);
#pragma unroll
      for (int q = 0; q < R; ++q) v[q][h] = part[q];
    }
    // r0 is a multiple of R (<= 8), so rows r0 .. r0 + R share row / 32 and differ only in the
    // (row % 32) * 16 term of the scale-factor offset: one address per group of rows.
    uint8_t *const sf_rows = pinned(sf + sf_offset(r0, block, k_blocks));
    const int64_t e0 = r0 * k + i0;
    uint8_t *const out_rows = out + ((e0 * E::bits) >> 3);
#pragma unroll
    for (int q = 0; q < R; ++q) {
      // |x| bit patterns order like the values, with every NaN above infinity: the max
      // propagates NaN (the OCP rule).
      uint32_t m = kRuns == 1 ? absmax_bits8(v[q][0]) : absmax_bits16(v[q][0], v[q][kRuns - 1]);
#pragma unroll
      for (int o = kPerBlock / 2; o > 0; o /= 2) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
      const int64_t row = r0 + q;
      if (!live || row >= rows) continue;
      // OCP MX: X = 2^(floor(log2 amax) - emax), clamped to [2^-127, 2^127]; NaN/inf → NaN scale.
      // In biased form: code = clamp(biased exponent of amax - emax, 0, 254); a zero or subnormal
      // amax has biased exponent 0 and floor(log2) < -126, so it clamps to 0 too.
      const int biased = int(m >> 23);  // 255: inf or NaN
      const bool finite = biased != 255;
      const int code = max(0, min(254, biased - E::emax));
      const uint8_t sf_code = finite ? uint8_t(code) : uint8_t(0xff);
      // 2^-e = 2^(127 - code) as an f32 (2^-127, for code 254, is subnormal but exact).
      const float inv = code < 254 ? __uint_as_float(uint32_t(254 - code) << 23) : __uint_as_float(0x00400000u);
      if (sf_writer) sf_rows[16 * q] = sf_code;
      if constexpr (E::bits == 8) {
        // FP8 elements: paired hardware conversions, stored directly.
        const uint2 w = finite ? fp8_pack8(v[q][0], inv, kElem == kE4M3 ? __NV_E4M3 : __NV_E5M2) : make_uint2(0, 0);
        store_fp8(out, e0 + q * k, w, n);
      } else if (n == kPer) {
        // Full runs (the common case): no per-element predicates, 32-bit packing.
        // A NaN/inf block stores zero elements (never NaN into the NaN-free encoder).
        static_assert(kRuns == 2, "sub-byte elements take two runs per thread");
        store_packed16_at<E::bits>(out_rows + q * row_bytes, finite ? mx_sub8<E>(v[q][0], inv) : 0u,
                                   finite ? mx_sub8<E>(v[q][1], inv) : 0u, rows_wide, rows_aligned);
      } else {
#pragma unroll
        for (int h = 0; h < kRuns; ++h) {
          const int nh = n - 8 * h;
          if (nh <= 0) break;
          uint8_t codes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
          for (int j = 0; j < 8; ++j)
            if (j < nh) codes[j] = E::cvt(finite ? to_f32(v[q][h].e[j]) * inv : 0.0f);
          store_codes<E::bits>(out, e0 + q * k + 8 * h, codes, nh < 8 ? nh : 8);
        }
      }
    }
  }
}

// NVFP4 (e2m1 elements, ue4m3 scale per 16 elements, with the global scale amax / (448 * 6)): one
// thread per scale block, 16 elements per row, rows_per_thread / 2 rows, so the per-block work (the
// amax, the scale's division and conversion) is done once per 16 elements.
template <class T>
__global__ void __launch_bounds__(kThreads, 3)
    nvfp4_kernel(const T *x, int64_t rows, int64_t k, uint8_t *out, uint8_t *sf, const float *global_amax_in) {
  using E = Elem<kE2M1>;
  constexpr int R = rows_per_thread<T>() / 2;
  const int64_t blocks_per_row = (k + 15) / 16;
  const int64_t k_blocks = (blocks_per_row + 3) / 4;
  const int64_t block_all = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = block_all < blocks_per_row;
  const int64_t block = live ? block_all : 0;
  const int64_t i0 = block * 16;
  const int n = live ? int((k - i0) < 16 ? (k - i0) : 16) : 0;
  const float ga = *global_amax_in;
  const float global = (ga > 0.0f && isfinite(ga)) ? ga / (448.0f * 6.0f) : 1.0f;
  // 1 / (decoded scale * global) for each of the 128 non-negative ue4m3 codes, computed once per
  // CTA with the same f32 operations the per-block path would use (0 for a zero scale).
  __shared__ float inv_of_code[128];
  if (threadIdx.x < 128) {
    const float d = __half2float(__half(__nv_cvt_fp8_to_halfraw(uint8_t(threadIdx.x), __NV_E4M3))) * global;
    inv_of_code[threadIdx.x] = d > 0.0f ? 1.0f / d : 0.0f;
  }
  __syncthreads();
  const int64_t row_bytes = k / 2;  // k is even
  // A block's 8 bytes start at a multiple of 8 bytes into its row.
  const bool rows_aligned = row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 4 == 0;
  const bool rows_wide = row_bytes % 8 == 0 && reinterpret_cast<uintptr_t>(out) % 8 == 0;
  for (int64_t r0 = int64_t(blockIdx.y) * R; r0 < rows; r0 += int64_t(gridDim.y) * R) {
    Raw8<T> v[R][2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      Raw8<T> part[R];
      load_rows<R>(x, rows, k, r0, i0 + 8 * h, live && 8 * h < n, part);
#pragma unroll
      for (int q = 0; q < R; ++q) v[q][h] = part[q];
    }
    uint8_t *const sf_rows = pinned(sf + sf_offset(r0, block, k_blocks));  // r0 is a multiple of R (<= 4)
    const int64_t e0 = r0 * k + i0;
    uint8_t *const out_rows = out + (e0 >> 1);
#pragma unroll
    for (int q = 0; q < R; ++q) {
      const int64_t row = r0 + q;
      if (!live || row >= rows) continue;
      // The amax ignores NaN (fmaxf); a block with NaN takes the per-element path below.
      const uint32_t m = absmax_bits16(v[q][0], v[q][1]);
      const bool has_nan = m > 0x7f800000u;
      const float amax = has_nan ? fmaxf(absmax8(v[q][0]), absmax8(v[q][1])) : __uint_as_float(m);
      // amax >= 0 and NaN-free, so the code is non-negative (0x7e at most, satfinite).
      const uint8_t sf_code = __nv_cvt_float_to_fp8(amax / (6.0f * global), __NV_SATFINITE, __NV_E4M3);
      sf_rows[16 * q] = sf_code;
      const float inv = inv_of_code[sf_code & 0x7f];
      const bool zero_scale = inv == 0.0f;
      if (n == 16 && !zero_scale && !has_nan) {
        store_packed16_at<4>(out_rows + q * row_bytes, nv_sub8(v[q][0], inv), nv_sub8(v[q][1], inv), rows_wide,
                             rows_aligned);
        continue;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int nh = n - 8 * h;
        if (nh <= 0) break;
        uint8_t codes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
        for (int j = 0; j < 8; ++j)
          if (j < nh) codes[j] = E::cvt(zero_scale ? 0.0f : to_f32(v[q][h].e[j]) * inv);  // zero scale: +0
        store_codes<4>(out, e0 + q * k + 8 * h, codes, nh < 8 ? nh : 8);
      }
    }
  }
}

// |x| max over the whole tensor, NaN ignored (fmaxf), as the host's fold with f32::max.
template <class T>
__global__ void __launch_bounds__(kThreads) amax_kernel(const T *x, int64_t n, unsigned *amax_bits) {
  float m = 0.0f;
  float v[8];
  for (int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8; i < n; i += int64_t(gridDim.x) * blockDim.x * 8) {
    load8(x, i, n, v);
#pragma unroll
    for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(v[j]));
  }
  m = group_max<false>(m, 32);
  __shared__ float warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    // Non-negative floats order like their bit patterns.
    atomicMax(amax_bits, __float_as_uint(m));
  }
}

// FP8 1 x 128 groups: 16 threads per group, rows_per_thread<T> rows per thread.
// kMnMajor: scales written [k blocks][rows] (what the SM90 blockwise GEMM reads) instead of
// [rows][k blocks]; a template parameter, so the index costs nothing in the unrolled row loop.
template <class T, bool kMnMajor>
__global__ void __launch_bounds__(kThreads) fp8_1x128_kernel(const T *x, int64_t rows, int64_t k, uint8_t *out,
                                                            float *scales) {
  constexpr int kPer = 16;
  constexpr int R = rows_per_thread<T>();
  const int64_t groups_per_row = (k + 127) / 128;
  const int64_t threads_per_row = groups_per_row * kPer;
  const int64_t chunk_all = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = chunk_all < threads_per_row;
  const int64_t chunk = live ? chunk_all : 0;
  const int64_t i0 = chunk * 8;
  const int n = live ? int((k - i0) < 8 ? (k - i0) : 8) : 0;
  for (int64_t r0 = int64_t(blockIdx.y) * R; r0 < rows; r0 += int64_t(gridDim.y) * R) {
    Raw8<T> v[R];
    load_rows<R>(x, rows, k, r0, i0, live, v);
#pragma unroll
    for (int q = 0; q < R; ++q) {
      float amax = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(to_f32(v[q].e[j])));
      amax = group_max<false>(amax, kPer);
      const int64_t row = r0 + q;
      if (!live || row >= rows) continue;
      const float a = fmaxf(amax, 1e-4f);
      store_fp8(out, row * k + i0, fp8_pack8(v[q], 448.0f / a, __NV_E4M3), n);
      if (chunk % kPer == 0)
        scales[kMnMajor ? (i0 / 128) * rows + row : row * groups_per_row + i0 / 128] = a / 448.0f;
    }
  }
}

// FP8 128 x 128 blocks in one pass: a CTA of 512 threads holds its block in registers (32 values
// per thread), so the input is read once.
constexpr int kBlockThreads = 512;

template <class T>
__global__ void __launch_bounds__(kBlockThreads) fp8_128x128_kernel(const T *x, int64_t rows, int64_t cols, uint8_t *out,
                                                                   float *scales, bool mn_major) {
  const int64_t bc = (cols + 127) / 128;
  const int64_t brow = blockIdx.x / bc, bcol = blockIdx.x % bc;
  // Thread layout: 16 threads per row of 128 (8 values each), 32 rows per pass, 4 passes.
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  const int64_t c0 = bcol * 128 + tc * 8;
  Raw8<T> v[4];
  float amax = 0.0f;
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int64_t r = brow * 128 + p * 32 + tr;
    if (r < rows && c0 < cols) load_raw8(x + r * cols, c0, cols, v[p]);
    else {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[p].e[j] = T(0.0f);
    }
  }
#pragma unroll
  for (int p = 0; p < 4; ++p)
#pragma unroll
    for (int j = 0; j < 8; ++j) amax = fmaxf(amax, fabsf(to_f32(v[p].e[j])));
  amax = group_max<false>(amax, 32);
  __shared__ float warp_max[kBlockThreads / 32];
  __shared__ float block_scale;
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = warp_max[0];
    for (int w = 1; w < kBlockThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    const float a = fmaxf(m, 1e-4f);
    block_scale = 448.0f / a;  // the inverse scale
    const int64_t br = (rows + 127) / 128;
    scales[mn_major ? bcol * br + brow : brow * bc + bcol] = a / 448.0f;
  }
  __syncthreads();
  const float inv = block_scale;
  if (c0 >= cols) return;
  const int n = int((cols - c0) < 8 ? (cols - c0) : 8);
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    const int64_t r = brow * 128 + p * 32 + tr;
    if (r >= rows) continue;
    store_fp8(out, r * cols + c0, fp8_pack8(v[p], inv, __NV_E4M3), n);
  }
}

// Dequantization to f32: value = element * scale (* global), one rounding, as the host does in f64
// then rounds once.
__device__ __forceinline__ float decode(int elem, const uint8_t *packed, int64_t i) {
  switch (elem) {
    case kE4M3: return __half2float(__half(__nv_cvt_fp8_to_halfraw(packed[i], __NV_E4M3)));
    case kE5M2: return __half2float(__half(__nv_cvt_fp8_to_halfraw(packed[i], __NV_E5M2)));
    case kE2M1: {
      uint8_t c = (packed[i / 2] >> ((i % 2) * 4)) & 0xf;
      return __half2float(__half(__nv_cvt_fp4_to_halfraw(c, __NV_E2M1)));
    }
    default: {
      int64_t bit = i * 6;
      uint32_t w = packed[bit / 8] | (uint32_t((bit % 8) > 2 ? packed[bit / 8 + 1] : 0) << 8);
      uint8_t c = (w >> (bit % 8)) & 0x3f;
      return __half2float(__half(__nv_cvt_fp6_to_halfraw(c, elem == kE2M3 ? __NV_E2M3 : __NV_E3M2)));
    }
  }
}

__global__ void dequant_block_kernel(const uint8_t *packed, int elem, const uint8_t *sf, bool nv, const float *global_amax,
                                     int64_t rows, int64_t k, float *out) {
  const int vec = nv ? 16 : 32;
  const int64_t k_blocks = ((k + vec - 1) / vec + 3) / 4;
  float global = 1.0f;
  if (nv) {
    float ga = *global_amax;
    global = (ga > 0.0f && isfinite(ga)) ? ga / (448.0f * 6.0f) : 1.0f;
  }
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * k; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / k, c = i % k;
    const uint8_t s = sf[sf_offset(r, c / vec, k_blocks)];
    float scale;
    if (nv) scale = __half2float(__half(__nv_cvt_fp8_to_halfraw(s, __NV_E4M3)));
    else scale = (s == 0xff) ? __int_as_float(0x7fffffff) : (s == 0 ? __uint_as_float(0x00400000u) : __uint_as_float(uint32_t(s) << 23));
    float e = decode(elem, packed, i);
    out[i] = nv ? (e * scale) * global : e * scale;
  }
}

__global__ void dequant_fp8_blockwise_kernel(const uint8_t *q, const float *scales, int64_t rows, int64_t cols, int64_t br,
                                             int64_t bcs, bool mn_major, float *out) {
  const int64_t bc = (cols + bcs - 1) / bcs;
  const int64_t nbr = (rows + br - 1) / br;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < rows * cols; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const int64_t s = mn_major ? (c / bcs) * nbr + r / br : (r / br) * bc + c / bcs;
    out[i] = __half2float(__half(__nv_cvt_fp8_to_halfraw(q[i], __NV_E4M3))) * scales[s];
  }
}

int status_of(cudaError_t e) { return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e); }

int grid_for(int64_t threads) { return int((threads + kThreads - 1) / kThreads); }

// Grid of the row kernels: x over one row's threads, y over rows (at most 65535; kernels stride).
dim3 row_grid(int64_t threads_per_row, int64_t rows, int rows_per = kRows) {
  const int64_t groups = (rows + rows_per - 1) / rows_per;
  return dim3(unsigned(grid_for(threads_per_row)), unsigned(groups < 65535 ? groups : 65535), 1);
}

template <class F>
int dispatch_input(int dtype, F &&f) {
  switch (dtype) {
    case CUTLASS_RS_DTYPE_F32: f(float{}); return CUTLASS_RS_OK;
    case CUTLASS_RS_DTYPE_F16: f(__half{}); return CUTLASS_RS_OK;
    case CUTLASS_RS_DTYPE_BF16: f(__nv_bfloat16{}); return CUTLASS_RS_OK;
    default: return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  }
}

}  // namespace

extern "C" int cutlass_rs_quantize_fp8_blockwise(const void *x, int x_dtype, int64_t rows, int64_t cols, int64_t block_rows,
                                                 int scales_mn_major, void *out, float *scales, void *stream) {
  if (!x || !out || !scales) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (rows <= 0 || cols <= 0 || (block_rows != 1 && block_rows != 128)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  int st = dispatch_input(x_dtype, [&](auto tag) {
    using T = decltype(tag);
    if (block_rows == 1) {
      const dim3 grid = row_grid(((cols + 127) / 128) * 16, rows, rows_per_thread<T>());
      if (scales_mn_major)
        fp8_1x128_kernel<T, true><<<grid, kThreads, 0, s>>>(static_cast<const T *>(x), rows, cols,
                                                             static_cast<uint8_t *>(out), scales);
      else
        fp8_1x128_kernel<T, false><<<grid, kThreads, 0, s>>>(static_cast<const T *>(x), rows, cols,
                                                              static_cast<uint8_t *>(out), scales);
    } else {
      int64_t blocks = ((rows + 127) / 128) * ((cols + 127) / 128);
      fp8_128x128_kernel<T><<<int(blocks), kBlockThreads, 0, s>>>(static_cast<const T *>(x), rows, cols,
                                                             static_cast<uint8_t *>(out), scales, scales_mn_major != 0);
    }
  });
  return st != CUTLASS_RS_OK ? st : status_of(cudaGetLastError());
}

extern "C" int cutlass_rs_quantize_block_scaled(const void *x, int x_dtype, int64_t rows, int64_t k, int elem_dtype, int nv,
                                                void *out, void *sf, int64_t sf_bytes, unsigned *amax_scratch,
                                                int amax_given, void *stream) {
  if (!x || !out || !sf || (nv && !amax_scratch)) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (rows <= 0 || k <= 0) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (nv && elem_dtype != CUTLASS_RS_DTYPE_E2M1) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  if ((elem_dtype == CUTLASS_RS_DTYPE_E2M1 && k % 2) || ((elem_dtype == CUTLASS_RS_DTYPE_E2M3 || elem_dtype == CUTLASS_RS_DTYPE_E3M2) && k % 4))
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int vec = nv ? 16 : 32;
  // The kernel writes every scale factor of the matrix; the layout's padding (rows to 128, scale
  // blocks to 4) is zeroed first where there is any.
  if (rows % 128 != 0 || ((k + vec - 1) / vec) % 4 != 0) {
    cudaError_t e = cudaMemsetAsync(sf, 0, size_t(sf_bytes), s);
    if (e != cudaSuccess) return status_of(e);
  }
  const int rows_per = x_dtype == CUTLASS_RS_DTYPE_F32 ? rows_per_thread<float>() : rows_per_thread<__half>();
  const int64_t blocks_per_row = (k + vec - 1) / vec;
  const bool fp8_elements = elem_dtype == kE4M3 || elem_dtype == kE5M2;
  const int runs = (nv || !fp8_elements) ? 2 : 1;  // runs of 8 per thread (mx_runs, nvfp4_kernel)
  const dim3 grid = row_grid(blocks_per_row * (vec / (8 * runs)), rows, rows_per / runs);
  int st = dispatch_input(x_dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *xp = static_cast<const T *>(x);
    uint8_t *o = static_cast<uint8_t *>(out);
    uint8_t *f = static_cast<uint8_t *>(sf);
    if (nv) {
      if (!amax_given) {
        cudaMemsetAsync(amax_scratch, 0, sizeof(unsigned), s);
        int64_t amax_ctas = (rows * k + 8 * kThreads - 1) / (8 * kThreads);
        amax_kernel<T><<<int(amax_ctas < 4096 ? amax_ctas : 4096), kThreads, 0, s>>>(xp, rows * k, amax_scratch);
      }
      nvfp4_kernel<T><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f, reinterpret_cast<const float *>(amax_scratch));
      return;
    }
    switch (elem_dtype) {
      case kE4M3: block_quant_kernel<T, kE4M3><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f); break;
      case kE5M2: block_quant_kernel<T, kE5M2><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f); break;
      case kE2M3: block_quant_kernel<T, kE2M3><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f); break;
      case kE3M2: block_quant_kernel<T, kE3M2><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f); break;
      case kE2M1: block_quant_kernel<T, kE2M1><<<grid, kThreads, 0, s>>>(xp, rows, k, o, f); break;
      default: break;
    }
  });
  if (st != CUTLASS_RS_OK) return st;
  if (!nv && (elem_dtype < kE4M3 || elem_dtype > kE2M1)) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  return status_of(cudaGetLastError());
}

extern "C" int cutlass_rs_dequantize_block_scaled(const void *packed, int elem_dtype, const void *sf, int nv,
                                                  const unsigned *amax, int64_t rows, int64_t k, float *out, void *stream) {
  if (!packed || !sf || !out || (nv && !amax)) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (elem_dtype < kE4M3 || elem_dtype > kE2M1) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  dequant_block_kernel<<<1024, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint8_t *>(packed), elem_dtype, static_cast<const uint8_t *>(sf), nv != 0,
      reinterpret_cast<const float *>(amax), rows, k, out);
  return status_of(cudaGetLastError());
}

extern "C" int cutlass_rs_dequantize_fp8_blockwise(const void *q, const float *scales, int64_t rows, int64_t cols,
                                                   int64_t block_rows, int scales_mn_major, float *out, void *stream) {
  if (!q || !scales || !out) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  dequant_fp8_blockwise_kernel<<<1024, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      static_cast<const uint8_t *>(q), scales, rows, cols, block_rows, 128, scales_mn_major != 0, out);
  return status_of(cudaGetLastError());
}

// The reference for host-overhead measurements: an empty kernel launched the way CUTLASS launches
// its SM90 kernels (cudaLaunchKernelEx with a cluster-dimension attribute), so that the difference
// between a planned GEMM's per-call host time and this one is what the library adds.
namespace {
__global__ void launch_probe_kernel() {}
}  // namespace

extern "C" int cutlass_rs_launch_probe(int cluster_x, int cluster_y, void *stream) {
  if (cluster_x < 1 || cluster_y < 1) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(cluster_x, cluster_y, 1);
  config.blockDim = dim3(128, 1, 1);
  config.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_x;
  attr[0].val.clusterDim.y = cluster_y;
  attr[0].val.clusterDim.z = 1;
  config.attrs = attr;
  config.numAttrs = 1;
  return status_of(cudaLaunchKernelEx(&config, launch_probe_kernel));
}
