/* Part of cutlass-gemm-sys (csrc/cutlass_rs_dense_gemv_abi.h); not generated, copied next to the
 * generated sources. The C ABI of the 16-bit decode GEMV (cutlass_rs_dense_gemv.cu): a linear
 * layer's GEMM in bf16 or f16 for a few tokens. Apart from cutlass_rs_abi.h, so that changing it
 * leaves the CUTLASS kernels' cached objects valid. */
#ifndef CUTLASS_RS_DENSE_GEMV_ABI_H
#define CUTLASS_RS_DENSE_GEMV_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cutlass_rs_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most tokens (rows of X and D) the GEMV takes. */
#define CUTLASS_RS_DENSE_GEMV_MAX_TOKENS 32

/* D = act(alpha * row_scale[t] * col_scale[j] * (X . W^T) + beta * C + row_bias[t] + col_bias[j])
 * for t < m tokens and j < n, all of one type (dtype CUTLASS_RS_DTYPE_BF16 or _F16), products
 * exact and summed in f32, the epilogue in f32 (the fused CUTLASS kernels' formula, in D's
 * orientation: rows are tokens, columns output features):
 *   x: m x k, row t at x + t * ldx (elements);
 *   w: n x k (the weight, B column-major), row j at w + j * ldw;
 *   c, d: m x n, row t at t * ldc (ldd); c is read only when beta != 0;
 *   row_scale (m f32), col_scale (n f32), row_bias (m values), col_bias (n values): each optional
 *   (NULL: a scale of 1, a bias of 0); the biases of D's type, or f32 where bias_f32 is not 0;
 *   activation: a CUTLASS_RS_ACTIVATION_* code (CUTLASS_RS_ACTIVATION_IDENTITY for none). */
typedef struct cutlass_rs_dense_gemv_args {
  int64_t m;
  int64_t n;
  int64_t k;
  const void *x;
  int64_t ldx;
  const void *w;
  int64_t ldw;
  const void *c;
  int64_t ldc;
  void *d;
  int64_t ldd;
  float alpha;
  float beta;
  int32_t device_id;
  int32_t sm_count;
  const float *row_scale;
  const float *col_scale;
  const void *row_bias;
  const void *col_bias;
  int32_t activation;
  int32_t bias_f32;
} cutlass_rs_dense_gemv_args;

/* Checks the arguments (1 <= m <= CUTLASS_RS_DENSE_GEMV_MAX_TOKENS; n a multiple of 16 and k of
 * 64, n * k below 2^31; ldx and ldw multiples of 8 of at least k, ldd (ldc) at least n; x and w
 * 16-byte aligned, the scales and f32 biases 4-byte and 16-bit biases 2-byte aligned; a known activation code; the
 * calling thread's device device_id) and, when launch_it is not 0, launches on `stream`. */
int cutlass_rs_dense_gemv(const cutlass_rs_dense_gemv_args *args, int32_t dtype, int32_t launch_it,
                          void *stream);

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_DENSE_GEMV_ABI_H */
