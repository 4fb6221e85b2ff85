// Oracle for tests/format_crosscheck.rs: the quantization kernels' FP6/FP4 encoders and packers
// (cutlass-gemm-sys/csrc/narrow_encode.cuh), compiled for the host. The test compares them with the crate's
// host codec, so a change to the device encoders is checked in CI without a GPU.
// Host code only; needs no GPU. Not generated: a test program.
//
// usage: encoders INPUT.f32 OUTPUT.bin
//   INPUT: little-endian f32 values. OUTPUT, in order:
//   1. per input: encode_f32 for e2m3, e3m2, e2m1 (3 bytes);
//   2. for bf16 then f16 pairs, for e2m3, e3m2, e2m1, for u in 0..65536: encode_x2 of the pair
//      (low lane u, high lane u * 40503 mod 2^16), the two codes (2 bytes);
//   3. per 2 inputs (whole pairs only), for e2m3, e3m2, e2m1: encode_x2<F, __half2> of
//      f16x2_round_odd(first, second), the two codes (2 bytes per format);
//   4. per 8 inputs (whole groups only): the e2m1 codes packed by pack_fp4_pairs (4 bytes), the
//      e2m3 codes packed by pack_fp6_pairs (6 bytes), the e2m1 codes packed by pack_fp4_spread
//      (4 bytes).
#include "oracle_io.h"
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../../../cutlass-gemm-sys/csrc/narrow_encode.cuh"

using namespace cutlass_rs;

template <class F, class H2>
static void section2(std::FILE *out) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const uint32_t hi = (u * 40503u) & 0xffffu;
    const uint32_t c = encode_x2<F, H2>(u | (hi << 16));
    const uint8_t b[2] = {uint8_t(c & 0xffu), uint8_t((c >> 16) & 0xffu)};
    std::fwrite(b, 1, 2, out);
  }
}

template <class H2>
static void section2_all(std::FILE *out) {
  section2<FmtE2M3, H2>(out);
  section2<FmtE3M2, H2>(out);
  section2<FmtE2M1, H2>(out);
}

int main(int argc, char **argv) {
  std::vector<float> xs;
  std::FILE *out = nullptr;
  if (!oracle_io(argc, argv, xs, out)) return 2;

  for (float x : xs) {
    const uint8_t b[3] = {uint8_t(encode_f32<FmtE2M3>(x)), uint8_t(encode_f32<FmtE3M2>(x)),
                          uint8_t(encode_f32<FmtE2M1>(x))};
    std::fwrite(b, 1, 3, out);
  }

  section2_all<__nv_bfloat162>(out);
  section2_all<__half2>(out);

  for (size_t i = 0; i + 2 <= xs.size(); i += 2) {
    const uint32_t h = f16x2_round_odd(xs[i], xs[i + 1]);
    const uint32_t c[3] = {encode_x2<FmtE2M3, __half2>(h), encode_x2<FmtE3M2, __half2>(h),
                           encode_x2<FmtE2M1, __half2>(h)};
    uint8_t b[6];
    for (int f = 0; f < 3; ++f) {
      b[2 * f] = uint8_t(c[f] & 0xffu);
      b[2 * f + 1] = uint8_t((c[f] >> 16) & 0xffu);
    }
    std::fwrite(b, 1, 6, out);
  }

  for (size_t g = 0; g + 8 <= xs.size(); g += 8) {
    uint32_t c4[4], c6[4];
    for (int i = 0; i < 4; ++i) {
      c4[i] = encode_f32<FmtE2M1>(xs[g + 2 * i]) | (encode_f32<FmtE2M1>(xs[g + 2 * i + 1]) << 16);
      c6[i] = encode_f32<FmtE2M3>(xs[g + 2 * i]) | (encode_f32<FmtE2M3>(xs[g + 2 * i + 1]) << 16);
    }
    uint32_t c4s[4];
    for (int i = 0; i < 4; ++i) c4s[i] = encode_f32<FmtE2M1>(xs[g + i]) | (encode_f32<FmtE2M1>(xs[g + i + 4]) << 16);
    const uint32_t w4 = pack_fp4_pairs(c4);
    const uint64_t w6 = pack_fp6_pairs(c6);
    const uint32_t w4s = pack_fp4_spread(c4s);
    uint8_t b[14];
    for (int i = 0; i < 4; ++i) b[i] = uint8_t(w4 >> (8 * i));
    for (int i = 0; i < 6; ++i) b[4 + i] = uint8_t(w6 >> (8 * i));
    for (int i = 0; i < 4; ++i) b[10 + i] = uint8_t(w4s >> (8 * i));
    std::fwrite(b, 1, 14, out);
  }
  std::fclose(out);
  return 0;
}
