/* Part of cutlass-gemm-sys (csrc/cutlass_rs_grouped_abi.h); not generated, copied next to the
 * generated sources. The C ABI of the grouped GEMM kernels (SM90, SM100 and SM120 pointer-array
 * kernels, whose names hold `_gemm_grouped_`): their argument struct, problem layouts and registry entry. A header of
 * its own, so that only the grouped kernels' objects depend on it. */
#ifndef CUTLASS_RS_GROUPED_ABI_H
#define CUTLASS_RS_GROUPED_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "cutlass_rs_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A grouped GEMM runs `groups` problems in one launch:
 *   D_g = alpha * alpha_g * A_g . B_g + beta * C_g        for g = 0 .. groups - 1
 * A_g is m_g x k_g row-major, B_g is k_g x n_g column-major (an n_g x k_g row-major weight), C_g and
 * D_g are m_g x n_g row-major; leading dimensions in elements. The per-group arrays the kernel reads
 * (extents, operand pointers, strides, alphas) are written into the workspace on the device by a
 * small kernel launched before the GEMM in the same stream, from one of three layouts:
 *
 * CONTIGUOUS: the rows of all groups stacked, as a mixture-of-experts layer sorts its tokens by
 *   expert. A is rows x k (lda), C and D are rows x n (ldc, ldd); group g owns rows
 *   [start_g, end_g), start_g = clamp(group_rows[g], 0, rows), end_g = clamp(group_rows[g + 1],
 *   start_g, rows): group_rows holds groups + 1 int32 offsets on the device. B_g = b + g *
 *   batch_stride_b (one weight per expert, ldb).
 * MASKED: a fixed capacity of rows per group, counts on the device (usable under CUDA graph
 *   capture: nothing is read on the host). A_g = a + g * batch_stride_a (capacity x k), likewise
 *   B_g, C_g, D_g; m_g = clamp(group_rows[g], 0, rows), rows being the capacity.
 * LIST: any extents: problems is a device array of `groups` cutlass_rs_grouped_problem. Its
 *   entries are read on the device and used as they are: extents, pointers and leading dimensions
 *   that the buffers hold and the kernel's alignment allows are the caller's to ensure (the safe
 *   Rust API, GroupedListGemm, checks them on the host before it copies the list).
 *
 * Blockwise kernels (FP8 with f32 scales per 1x128 block of A and per 128x128 block of B; their
 * names end in `_sfk`) also read scale_a and scale_b, both K-major (row-major): scale_a holds
 * ceil(k / 128) scales per row of A (CONTIGUOUS: rows rows; MASKED: groups * rows, group after
 * group), scale_b ceil(n / 128) * ceil(k / 128) per group, group after group. A group's scales
 * follow its rows the way its A does. They take the CONTIGUOUS and MASKED layouts only.
 *
 * Block-scaled kernels (SM100/SM120 MX and NVFP4 operands; `bstensorop` in their names) read
 * scale_a and scale_b as scale factors of `vec` elements of K (32 for MX, 16 for NVFP4) in CUTLASS's
 * Sm1xxBlockScaledConfig layout, one such tensor per group: a group of m rows has ceil(m / 128) row
 * blocks of cols = 4 * ceil(ceil(k / vec) / 4) scale columns (128 * cols bytes each). Group g's
 * factors of A start at row block b_g (byte b_g * 128 * cols of scale_a): CONTIGUOUS b_g = start_g /
 * 128 + g, MASKED b_g = g * ceil(rows / 128), so scale_a holds (ceil(rows / 128) + groups - 1) (or
 * groups * ceil(rows / 128)) row blocks; expert g's factors of B start at row block g * ceil(n / 128).
 * Per-tensor scales (NVFP4) go into alphas. They take the CONTIGUOUS and MASKED layouts only.
 *
 * Offsets and counts are clamped, never trusted: no group reaches past rows. Offsets that are not
 * monotone give groups that overlap (an unspecified D in their rows, never an access out of A, C or
 * D). c may equal d; the kernel reads C only when beta != 0. alphas, when not null, holds one f32
 * per group (alpha_g; 1 otherwise), read on the device.
 */
#define CUTLASS_RS_GROUPED_CONTIGUOUS 0
#define CUTLASS_RS_GROUPED_MASKED 1
#define CUTLASS_RS_GROUPED_LIST 2

/* One problem of the LIST layout. */
typedef struct cutlass_rs_grouped_problem {
  int64_t m;
  int64_t n;
  int64_t k;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  const void *c;
  int64_t ldc;
  void *d;
  int64_t ldd;
} cutlass_rs_grouped_problem;

typedef struct cutlass_rs_grouped_args {
  /* CUTLASS_RS_GROUPED_* */
  int32_t layout;
  int32_t groups;
  /* CONTIGUOUS: rows of A, C and D; MASKED: rows per group (the capacity). */
  int64_t rows;
  /* CONTIGUOUS and MASKED: the extents every group shares. */
  int64_t n;
  int64_t k;
  const void *a;
  int64_t lda;
  int64_t batch_stride_a;
  const void *b;
  int64_t ldb;
  int64_t batch_stride_b;
  const void *c;
  int64_t ldc;
  int64_t batch_stride_c;
  void *d;
  int64_t ldd;
  int64_t batch_stride_d;
  /* CONTIGUOUS: groups + 1 offsets; MASKED: groups counts (device int32). */
  const int32_t *group_rows;
  /* LIST: groups problems (device). */
  const cutlass_rs_grouped_problem *problems;
  /* Blockwise kernels: the f32 scales of A and B; block-scaled kernels: their scale factors (one
   * byte each); device pointers, else null. */
  const void *scale_a;
  const void *scale_b;
  /* Per-group alphas (device f32), or null. */
  const float *alphas;
  float alpha;
  float beta;
  int32_t device_id;
  int32_t sm_count;
  /* Zero (no launch flag applies to grouped kernels yet); keeps the struct free of padding: launches
   * compare it bytewise. */
  int32_t launch_flags;
  int32_t reserved;
} cutlass_rs_grouped_args;

typedef int (*cutlass_rs_grouped_can_implement_fn)(const cutlass_rs_grouped_args *args);
/* The workspace: the per-group arrays, then CUTLASS's own (its per-SM TMA descriptors). */
typedef int (*cutlass_rs_grouped_workspace_size_fn)(const cutlass_rs_grouped_args *args,
                                                    size_t *bytes);
/* Launches the per-group argument builder and the GEMM on the stream. */
typedef int (*cutlass_rs_grouped_run_fn)(const cutlass_rs_grouped_args *args, void *workspace,
                                         size_t workspace_bytes, void *stream);
/* run() up to the launches: checks, CUTLASS's can_implement, the kernel parameters. */
typedef int (*cutlass_rs_grouped_prepare_fn)(const cutlass_rs_grouped_args *args, void *workspace,
                                             size_t workspace_bytes);

/* One compiled grouped kernel: its procedural name (the catalog's) and its entry points. */
typedef struct cutlass_rs_grouped_kernel_entry {
  const char *name;
  cutlass_rs_grouped_can_implement_fn can_implement;
  cutlass_rs_grouped_workspace_size_fn workspace_size;
  cutlass_rs_grouped_run_fn run;
  cutlass_rs_grouped_prepare_fn prepare;
} cutlass_rs_grouped_kernel_entry;

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_GROUPED_ABI_H */
