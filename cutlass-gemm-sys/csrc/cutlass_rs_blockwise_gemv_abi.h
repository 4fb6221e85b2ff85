/* Part of cutlass-gemm-sys (csrc/cutlass_rs_blockwise_gemv_abi.h); not generated, copied next to
 * the generated sources. The C ABI of the FP8 blockwise decode GEMV (cutlass_rs_blockwise_gemv.cu):
 * the blockwise GEMM of the DeepSeek-V3 recipe for a few tokens. Apart from cutlass_rs_abi.h, so
 * that changing it leaves the CUTLASS kernels' cached objects valid. */
#ifndef CUTLASS_RS_BLOCKWISE_GEMV_ABI_H
#define CUTLASS_RS_BLOCKWISE_GEMV_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cutlass_rs_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most tokens (rows of X and D) the GEMV takes. */
#define CUTLASS_RS_BLOCKWISE_GEMV_MAX_TOKENS 32

/* D = alpha * sum_kb (sx[kb][t] * sw[kb][j / 128]) * sum_{i in kb} x[t][i] * w[j][i] + beta * C,
 * the k-blocks kb of 128 columns (the last one may hold 64), for t < m tokens and j < n:
 *   x: m x k e4m3 (bytes), row t at x + t * ldx;
 *   scales_x: f32, one per token and k-block, k-block after k-block ([ceil(k / 128)][m]: the M-major
 *     order of CUTLASS's Sm90BlockwiseScaleConfig);
 *   w: n x k e4m3 (the weight, B column-major), row j at w + j * ldw;
 *   scales_w: f32, one per 128 x 128 block, [ceil(k / 128)][ceil(n / 128)];
 *   c, d: m x n of the output type, row t at t * ldc (ldd); c is read only when beta != 0.
 * Each k-block's sum is exact in f32 when the products' sum is (e4m3 products are); it is scaled
 * once, accum += sum * (sx * sw), as CUTLASS's blockwise kernels do. e4m3's NaN bytes in x or w make
 * their token's or row's outputs NaN. */
typedef struct cutlass_rs_blockwise_gemv_args {
  int64_t m;
  int64_t n;
  int64_t k;
  const void *x;
  int64_t ldx;
  const float *scales_x;
  const void *w;
  int64_t ldw;
  const float *scales_w;
  const void *c;
  int64_t ldc;
  void *d;
  int64_t ldd;
  float alpha;
  float beta;
  int32_t device_id;
  int32_t sm_count;
} cutlass_rs_blockwise_gemv_args;

/* Checks the arguments (1 <= m <= CUTLASS_RS_BLOCKWISE_GEMV_MAX_TOKENS; n a multiple of 16 and k of
 * 64, n * k below 2^31; ldx and ldw multiples of 16 of at least k, ldd (ldc) at least n; x and w
 * 16-byte aligned, the scales 4-byte aligned; d_dtype CUTLASS_RS_DTYPE_BF16 or _F16; the calling
 * thread's device device_id) and, when launch_it is not 0, launches on `stream`. */
int cutlass_rs_blockwise_gemv(const cutlass_rs_blockwise_gemv_args *args, int32_t d_dtype,
                              int32_t launch_it, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_BLOCKWISE_GEMV_ABI_H */
