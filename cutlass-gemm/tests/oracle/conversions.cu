// Oracle for tests/format_crosscheck.rs: CUDA's own host-callable conversion functions
// (cuda_fp8.h, cuda_fp6.h, cuda_fp4.h) and, where CUDA has none, CUTLASS's host conversions.
// Host code only; needs no GPU. Not generated: a test program.
//
// usage: conversions INPUT.f32 OUTPUT.bin
//   INPUT: little-endian f32 values. OUTPUT: the sections below, in order.
#include "oracle_io.h"
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_fp6.h>
#include <cuda_fp4.h>

#include "cute/container/array_subbyte.hpp"
#include "cutlass/float8.h"
#include "cutlass/float_subbyte.h"
#include "cutlass/tfloat32.h"

static float half_raw_to_float(__half_raw h) { return __half2float(__half(h)); }
static float bf16_raw_to_float(__nv_bfloat16_raw b) { return __bfloat162float(__nv_bfloat16(b)); }

int main(int argc, char **argv) {
  std::vector<float> xs;
  std::FILE *out = nullptr;
  if (!oracle_io(argc, argv, xs, out)) return 2;
  auto put_f = [&](float f) { std::fwrite(&f, 4, 1, out); };
  auto put_b = [&](uint8_t b) { std::fwrite(&b, 1, 1, out); };

  // Section 1: decode tables (f32 per code).
  for (int c = 0; c < 256; ++c) put_f(half_raw_to_float(__nv_cvt_fp8_to_halfraw(uint8_t(c), __NV_E4M3)));
  for (int c = 0; c < 256; ++c) put_f(half_raw_to_float(__nv_cvt_fp8_to_halfraw(uint8_t(c), __NV_E5M2)));
  for (int c = 0; c < 64; ++c) put_f(half_raw_to_float(__nv_cvt_fp6_to_halfraw(uint8_t(c), __NV_E2M3)));
  for (int c = 0; c < 64; ++c) put_f(half_raw_to_float(__nv_cvt_fp6_to_halfraw(uint8_t(c), __NV_E3M2)));
  for (int c = 0; c < 16; ++c) put_f(half_raw_to_float(__nv_cvt_fp4_to_halfraw(uint8_t(c), __NV_E2M1)));
  for (int c = 0; c < 256; ++c) put_f(bf16_raw_to_float(__nv_cvt_e8m0_to_bf16raw(uint8_t(c))));
  for (int c = 0; c < 128; ++c) put_f(float(cutlass::float_ue4m3_t::bitcast(uint8_t(c))));

  // Section 2: per input, 12 encoded bytes and the tf32 bits.
  for (float x : xs) {
    put_b(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
    put_b(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E4M3));
    put_b(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E5M2));
    put_b(__nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2));
    put_b(__nv_cvt_float_to_fp6(x, __NV_E2M3, cudaRoundNearest));
    put_b(__nv_cvt_float_to_fp6(x, __NV_E3M2, cudaRoundNearest));
    put_b(__nv_cvt_float_to_fp4(x, __NV_E2M1, cudaRoundNearest));
    put_b(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundZero));
    put_b(__nv_cvt_float_to_e8m0(x, __NV_SATFINITE, cudaRoundPosInf));
    put_b(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundZero));
    put_b(__nv_cvt_float_to_e8m0(x, __NV_NOSAT, cudaRoundPosInf));
    put_b(cutlass::float_ue4m3_t(x).raw());
    cutlass::tfloat32_t t(x);
    uint32_t bits;
    std::memcpy(&bits, &t, 4);
    std::fwrite(&bits, 4, 1, out);
  }

  // Section 3: the global-memory packing of 64 sub-byte elements with codes (7 i + 3) mod 2^bits,
  // written through cute's subbyte_iterator (what CuTe gmem tensors of these types use).
  // (cutlass::Array<6-bit type> is a register format with 32-bit words and is not used here.)
  {
    uint8_t p4[32] = {}, p6a[48] = {}, p6b[48] = {};
    cute::subbyte_iterator<cutlass::float_e2m1_t> i4(p4);
    cute::subbyte_iterator<cutlass::float_e2m3_t> i6a(p6a);
    cute::subbyte_iterator<cutlass::float_e3m2_t> i6b(p6b);
    for (int i = 0; i < 64; ++i) {
      i4[i] = cutlass::float_e2m1_t::bitcast(uint8_t((7 * i + 3) % 16));
      i6a[i] = cutlass::float_e2m3_t::bitcast(uint8_t((7 * i + 3) % 64));
      i6b[i] = cutlass::float_e3m2_t::bitcast(uint8_t((7 * i + 3) % 64));
    }
    std::fwrite(p4, 1, 32, out);
    std::fwrite(p6a, 1, 48, out);
    std::fwrite(p6b, 1, 48, out);
  }
  std::fclose(out);
  return 0;
}
