/* Part of cutlass-gemm-sys (csrc/cutlass_rs_weight_only_abi.h); not generated, copied next to the
 * generated sources. The C ABI of the weight-only GEMM kernels (SM90 mixed-input kernels, whose
 * names carry `_scl_shfl` or `_sclzr_shfl` for 4-bit weights, `_e4m3_..._scl` for FP8 ones and
 * `_s8_..._scl` for int8 ones): their argument struct and registry entry. A header of its own, so
 * that only the weight-only kernels' objects depend on it; the hand-written weight kernels
 * (packing, quantizers, the decode GEMV) are declared in cutlass_rs_weight_prep_abi.h, so that
 * changing them leaves these kernels' cached objects valid. */
#ifndef CUTLASS_RS_WEIGHT_ONLY_ABI_H
#define CUTLASS_RS_WEIGHT_ONLY_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cutlass_rs_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A weight-only GEMM computes, for a linear layer's input X (m x k, row-major, 16-bit) and its
 * quantized weight W (n x k, 4 or 8 bits per element):
 *   Y = alpha * X . dequant(W)^T + beta * C          Y and C m x n row-major
 *   dequant(W)[j][i] = round(q[j][i] * s[g][j] + z[g][j]),   g = i / group_size
 * rounded once to the activations' type (as measured: the kernels' multiply and add contract into
 * one fused multiply-add), with z = 0 for scale-only kernels. q is the signed (s4) or unsigned (u4)
 * 4-bit value; s and z are (k / group_size) x n row-major in the activations' type (one row per
 * group of k, the layout GPTQ and AWQ write their scales in). A GPTQ/AWQ zero point zp maps to
 * z = -s * zp (cutlass_rs_weight_zeros, in cutlass_rs_weight_prep_abi.h, does it).
 *
 * w is the packed weight: the n x k values of q, in the order cutlass_rs_weight_pack writes them
 * (the order in which the kernel's threads read them; n a multiple of
 * CUTLASS_RS_WEIGHT_PACK_ROWS, k a multiple of CUTLASS_RS_WEIGHT_PACK_COLS). The FP8 kernels
 * (weight e4m3, scales only) and int8 kernels (weight s8, scales only) read w as stored instead:
 * n x k values row-major, one byte each, dequant(W)[j][i] = round(e4m3(q[j][i]) * s[g][j])
 * (s8: round(q[j][i] * s[g][j])); cutlass_rs_weight_quantize_fp8 and
 * cutlass_rs_weight_quantize_int8 write them with one group (group_size = k). The kernel computes
 * Y^T = dequant(W) . X^T: W is the MMA's A (it passes through registers to be converted), X its B.
 */
#define CUTLASS_RS_WEIGHT_PACK_ROWS 16
#define CUTLASS_RS_WEIGHT_PACK_COLS 16

typedef struct cutlass_rs_weight_only_args {
  /* Rows of X, C and Y (tokens). */
  int64_t m;
  /* Rows of W (output features). */
  int64_t n;
  int64_t k;
  /* Elements of k per scale; a multiple of the kernel's tile k that divides k. */
  int64_t group_size;
  const void *x;
  int64_t ldx;
  const void *w;
  const void *scales;
  /* Kernels with zero points (_sclzr); must be null for scale-only ones. */
  const void *zeros;
  const void *c;
  int64_t ldc;
  void *d;
  int64_t ldd;
  /* Kernels with the fused epilogue (_evt_scale_bias{type}_act; the others ignore these), in the
   * kernel's orientation (rows: W's n, columns: the m tokens):
   *   Y^T = act(alpha * row_scale[n] * col_scale[m] * acc + beta * C^T + row_bias[n] + col_bias[m])
   * f32 scales, biases of Y's type; a null vector reads as 1 (scales) or 0 (biases). */
  const float *row_scale;
  const float *col_scale;
  const void *row_bias;
  const void *col_bias;
  float alpha;
  float beta;
  int32_t device_id;
  int32_t sm_count;
  /* Stream-K kernels: a split-K factor (> 1 replaces the stream-K decomposition); 0 otherwise. */
  int32_t splits;
  /* CUTLASS_RS_ACTIVATION_* (fused kernels). Also keeps the struct free of padding: launches
   * compare it bytewise. */
  int32_t activation;
} cutlass_rs_weight_only_args;

typedef int (*cutlass_rs_weight_only_can_implement_fn)(const cutlass_rs_weight_only_args *args);
typedef int (*cutlass_rs_weight_only_workspace_size_fn)(const cutlass_rs_weight_only_args *args,
                                                        size_t *bytes);
typedef int (*cutlass_rs_weight_only_run_fn)(const cutlass_rs_weight_only_args *args, void *workspace,
                                             size_t workspace_bytes, void *stream);
/* run() up to the launch: checks, CUTLASS's can_implement, the kernel parameters. */
typedef int (*cutlass_rs_weight_only_prepare_fn)(const cutlass_rs_weight_only_args *args,
                                                 void *workspace, size_t workspace_bytes);

/* One compiled weight-only kernel: its procedural name (the catalog's) and its entry points. */
typedef struct cutlass_rs_weight_only_kernel_entry {
  const char *name;
  cutlass_rs_weight_only_can_implement_fn can_implement;
  cutlass_rs_weight_only_workspace_size_fn workspace_size;
  cutlass_rs_weight_only_run_fn run;
  cutlass_rs_weight_only_prepare_fn prepare;
} cutlass_rs_weight_only_kernel_entry;

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_WEIGHT_ONLY_ABI_H */
