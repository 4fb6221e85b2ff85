/* Part of cutlass-gemm-sys (csrc/cutlass_rs_weight_prep_abi.h); not generated, copied next to the
 * generated sources. The C ABI of the hand-written weight kernels: packing checkpoints' 4-bit
 * values into the order the weight-only kernels read, their zeros, the quantizers from 16-bit
 * weights, and the decode GEMV. Apart from cutlass_rs_weight_only_abi.h, so that changing these
 * leaves the CUTLASS weight-only kernels' cached objects valid. */
#ifndef CUTLASS_RS_WEIGHT_PREP_ABI_H
#define CUTLASS_RS_WEIGHT_PREP_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cutlass_rs_abi.h"
#include "cutlass_rs_weight_only_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Formats of the 4-bit values cutlass_rs_weight_pack reads (q as n x k):
 * PLAIN: n rows of k values, two per byte, the even k in the low nibble (CUTLASS's int4b_t and
 *   uint4b_t arrays);
 * GPTQ: GPTQ's qweight, (k / 8) x n int32, value (i, j) in bits 4 (i % 8) of word (i / 8, j);
 * AWQ: AWQ's qweight, k x (n / 8) int32, value (i, j) in bits 4 p of word (i, j / 8), p the
 *   position of j % 8 in AWQ's order 0 2 4 6 1 3 5 7. */
#define CUTLASS_RS_WEIGHT_FORMAT_PLAIN 0
#define CUTLASS_RS_WEIGHT_FORMAT_GPTQ 1
#define CUTLASS_RS_WEIGHT_FORMAT_AWQ 2

/* Writes the n x k 4-bit values of `src` (in `format`) into `dst` (n * k / 2 bytes) in the packed
 * order the weight-only kernels read, XOR-ing each value with `flip` (0, or 8 to turn an unsigned
 * value u into the signed u - 8). The values are copied bit for bit otherwise. */
int cutlass_rs_weight_pack(int32_t format, const void *src, void *dst, int64_t n, int64_t k,
                           int32_t flip, void *stream);

/* cutlass_rs_weight_pack's inverse: writes the n x k 4-bit values of `src` (n * k / 2 bytes in
 * the packed order) into `dst` (n * k / 2 bytes) in the plain order (format PLAIN), bit for bit:
 * the order the SM100 weight-only kernels read. */
int cutlass_rs_weight_unpack(const void *src, void *dst, int64_t n, int64_t k, void *stream);

/* The additive zeros of the kernel from a checkpoint's zero points: z[g][j] = -s[g][j] * zp(g, j),
 * in the scales' type (dtype CUTLASS_RS_DTYPE_BF16 or CUTLASS_RS_DTYPE_F16), rounded once. zp(g, j) is read from
 * `qzeros` as GPTQ (format GPTQ: (groups x n / 8) int32, value j in bits 4 (j % 8) of word
 * (g, j / 8), plus `zero_offset` modulo 16: 1 for GPTQ's v1 checkpoints, which store zp - 1 in four
 * bits) or AWQ (format AWQ: the same words
 * in AWQ's order) write it, or as one byte per value (format PLAIN: groups x n uint8). */
int cutlass_rs_weight_zeros(int32_t format, const void *qzeros, const void *scales, void *zeros,
                            int32_t dtype, int64_t groups, int64_t n, int32_t zero_offset,
                            void *stream);

/* Quantizes a 16-bit weight w (n x k row-major, ldw; dtype bf16 or f16) group-wise along k: per
 * group of `group_size` values of a row, symmetric (zero_points 0: s = max|w| / 7, q =
 * clamp(round(w / s), -8, 7) as s4) or asymmetric (zero_points 1: s = (max - min) / 15,
 * zp = clamp(round(-min / s), 0, 15), q = clamp(round(w / s) + zp, 0, 15) as u4). Writes q in
 * the PLAIN format (n * k / 2 bytes), the scales ((k / group_size) x n) and, when asymmetric, the
 * zero points (groups x n uint8, the PLAIN format of cutlass_rs_weight_zeros). A group of zeros
 * gets s = 1; a group holding NaN or +-Inf gets s = NaN, the zero point 0 and the lowest value
 * (-8, or 0 with zero points), so that its row of any GEMM's output is NaN. */
int cutlass_rs_weight_quantize(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                               int64_t group_size, int32_t zero_points, void *q, void *scales,
                               void *zp, void *stream);

/* Quantizes a 16-bit weight w (n x k row-major, ldw; dtype bf16 or f16) to FP8 e4m3 with one scale
 * per row (output channel): s = max|w| / 448 rounded to the weight's type (1 where that rounds to
 * 0 or overflows), q = e4m3(w / s) rounded to nearest even and saturated to +-448
 * (__NV_SATFINITE). A row holding NaN or +-Inf gets s = NaN and q = 0x7F (NaN). Writes q
 * row-major (n * k bytes) and the n scales. */
int cutlass_rs_weight_quantize_fp8(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                                   void *q, void *scales, void *stream);

/* Quantizes a 16-bit weight w (n x k row-major, ldw; dtype bf16 or f16) to int8 with one scale
 * per row (output channel), symmetric: s = max|w| / 127 rounded to the weight's type (1 where that
 * rounds to 0 or overflows), q = clamp(round(w / s), -127, 127) rounded to nearest even. A row
 * holding NaN or +-Inf gets s = NaN and q = 0, so that its row of any GEMM's output is NaN. Writes
 * q row-major (n * k bytes, s8) and the n scales. */
int cutlass_rs_weight_quantize_int8(const void *w, int64_t ldw, int32_t dtype, int64_t n, int64_t k,
                                    void *q, void *scales, void *stream);

/* Sets to NaN the scale of every row of an FP8 weight (q: n x k e4m3 bytes row-major; scales: n
 * values of dtype bf16 or f16) that holds e4m3's NaN byte (0x7F or 0xFF), once at load time, so
 * that every kernel gives NaN for that row (the decode GEMV reads the bytes as finite values). */
int cutlass_rs_weight_fp8_nan_rows(const void *q, int64_t n, int64_t k, int32_t dtype, void *scales,
                                   void *stream);

/* The decode GEMV: the Y of a weight-only kernel (the fused epilogue's vectors and activation
 * included, C read only when beta is not 0) for 1 to CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS tokens,
 * from the same weight, scales and zeros, without a workspace. Hand-written
 * (csrc/cutlass_rs_weight_gemv.cu), built for every architecture of the build. It computes with
 * the exact dequantized values (q * s + z for 4-bit weights, each group's scale and zero applied
 * to f32 sums; e4m3(q) or q for FP8 and int8 ones, the row's scale applied to the f32 sum), not rounded to X's
 * type first as the kernels above do. dtype: X's type (CUTLASS_RS_DTYPE_BF16 or
 * CUTLASS_RS_DTYPE_F16); weight: CUTLASS_RS_WEIGHT_GEMV_S4 (signed packed 4-bit values, scales
 * only, zeros null), CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS (unsigned, with zeros) or
 * CUTLASS_RS_WEIGHT_GEMV_E4M3 (e4m3 values row-major, a scale per row: group_size = k, zeros null;
 * it reads e4m3's NaN byte as +-480, so an FP8 weight from elsewhere than the quantizer needs
 * cutlass_rs_weight_fp8_nan_rows first for NaN to reach Y) or CUTLASS_RS_WEIGHT_GEMV_S8 (s8 values
 * row-major, a scale per row: group_size = k, zeros null).
 * Rules: n a multiple of 16, k and group_size multiples of 64, group_size dividing k, n * k below
 * 2^31, ldx >= k and a multiple of 8, X and W 16-byte aligned, the 4-bit weights' scales and zeros
 * too, ldc, ldd >= n; args->device_id the current device. With launch 0 it checks the arguments
 * only. Uses args->sm_count to size its blocks and ignores splits. */
#define CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS 32
#define CUTLASS_RS_WEIGHT_GEMV_S4 0
#define CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS 1
#define CUTLASS_RS_WEIGHT_GEMV_E4M3 2
#define CUTLASS_RS_WEIGHT_GEMV_S8 3
int cutlass_rs_weight_gemv(const cutlass_rs_weight_only_args *args, int32_t dtype, int32_t weight,
                           int32_t launch, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_WEIGHT_PREP_ABI_H */
