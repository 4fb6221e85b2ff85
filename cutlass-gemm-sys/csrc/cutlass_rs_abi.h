/* Part of cutlass-gemm-sys (csrc/cutlass_rs_abi.h); not generated, copied next to the
 * generated sources. The types and status codes shared by the generated kernels, the quantization
 * kernels and Rust. Kernel objects are cached by their source plus this file, so declarations
 * elsewhere can change without recompiling them. */
#ifndef CUTLASS_RS_ABI_H
#define CUTLASS_RS_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes. 0..=11 are cutlass::Status values, in CUTLASS's order. */
#define CUTLASS_RS_OK 0
#define CUTLASS_RS_ERROR_MISALIGNED_OPERAND 1
#define CUTLASS_RS_ERROR_INVALID_DATA_TYPE 2
#define CUTLASS_RS_ERROR_INVALID_LAYOUT 3
#define CUTLASS_RS_ERROR_INVALID_PROBLEM 4
#define CUTLASS_RS_ERROR_NOT_SUPPORTED 5
#define CUTLASS_RS_ERROR_WORKSPACE_NULL 6
#define CUTLASS_RS_ERROR_INTERNAL 7
#define CUTLASS_RS_ERROR_ARCH_MISMATCH 8
#define CUTLASS_RS_ERROR_INSUFFICIENT_DRIVER 9
#define CUTLASS_RS_ERROR_MEMORY_ALLOCATION 10
#define CUTLASS_RS_ERROR_INVALID 11
/* A C++ exception was caught in the shim. */
#define CUTLASS_RS_ERROR_EXCEPTION 100
/* A required pointer argument was null. */
#define CUTLASS_RS_ERROR_NULL_ARGUMENT 101
/* The workspace passed to run() is smaller than workspace_size() said. */
#define CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL 102
/* The entry point exists but its kernels were not compiled into this build. */
#define CUTLASS_RS_ERROR_NOT_BUILT 103
/* The driver refused a TMA descriptor the kernel needs (cuTensorMapEncodeTiled failed; reported by
 * prepare(), e.g. sub-byte TMA types on a device before SM100). */
#define CUTLASS_RS_ERROR_TMA_DESCRIPTOR 104
/* The calling thread's current CUDA device is not args->device_id (run() launches on the current
 * device: make the device's context current, e.g. with cudaSetDevice, first). */
#define CUTLASS_RS_ERROR_WRONG_DEVICE 105
/* A CUDA runtime error: the status is CUTLASS_RS_ERROR_CUDA_BASE + the cudaError_t value. */
#define CUTLASS_RS_ERROR_CUDA_BASE 1000

/*
 * One GEMM: D = alpha * A.B + beta * C, batched over l = 0..batch.
 * A is m x k, B is k x n, C and D are m x n. The layout of each operand is fixed by the kernel;
 * ld* are leading dimensions in elements and batch_stride_* are the distances in elements between
 * consecutive matrices of a batch. c may equal d; when beta == 0 the kernel does not read c.
 */
typedef struct cutlass_rs_gemm_args {
  int64_t m;
  int64_t n;
  int64_t k;
  int64_t batch;
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
  float alpha;
  float beta;
  /* Block-scaled kernels: scale factors of A and B in the Sm1xxBlockScaledConfig layout (batch
   * after batch); ignored by other kernels. */
  const void *sfa;
  const void *sfb;
  /* Structured-sparse kernels: A is the compressed A (m x k/2, packed) and e its metadata, both
   * in the layouts of the kernel's SparseConfig; ignored by dense kernels. */
  const void *e;
  /* Block-scaled output (LinCombBlockScaleFactor epilogues): D's scale factors, written in the
   * Sm1xxBlockScaledConfig layout, and the device scalar the epilogue divides by; ignored by
   * other kernels. */
  void *sfd;
  const float *norm_constant;
  /* The CUDA device ordinal and its multiprocessor count (persistent kernels size their grid by it). */
  int32_t device_id;
  int32_t sm_count;
  /* Tile-scheduler hints, 0 for CUTLASS's defaults: the raster swizzle (1, 2, 4 or 8 CTAs), the
   * raster order (1 along M, 2 along N) and, for stream-K kernels, a split-K factor (> 1 replaces
   * the stream-K decomposition). */
  int32_t swizzle;
  int32_t raster;
  int32_t splits;
  /* CUTLASS_RS_LAUNCH_* bits. */
  int32_t launch_flags;
  /* Fused epilogues (kernels whose names end in _evt_scale_bias{type}_act):
   *   D = act(alpha * row_scale[i] * col_scale[j] * (A.B)[i][j] + beta * C[i][j]
   *           + row_bias[i] + col_bias[j])
   * computed in f32, for row i < m and column j < n. Each vector may be null: a scale is then 1
   * and a bias 0. The biases are of the kernel's bias type; the vectors are shared by every matrix
   * of the batch. activation is a CUTLASS_RS_ACTIVATION_* code. Ignored by other kernels. */
  const float *row_scale;
  const float *col_scale;
  const void *row_bias;
  const void *col_bias;
  int32_t activation;
  /* Zero. Makes the struct's size a sum of its fields' (no padding): launches compare it
   * bytewise. */
  int32_t reserved;
} cutlass_rs_gemm_args;

/* Activations of the fused epilogues. GELU_TANH is GELU's tanh approximation (with the hardware
 * tanh), GELU_ERF the exact one; SILU is x * sigmoid(x). */
#define CUTLASS_RS_ACTIVATION_IDENTITY 0
#define CUTLASS_RS_ACTIVATION_RELU 1
#define CUTLASS_RS_ACTIVATION_GELU_TANH 2
#define CUTLASS_RS_ACTIVATION_GELU_ERF 3
#define CUTLASS_RS_ACTIVATION_SILU 4

/* launch_flags: launch with programmatic dependent launch (CUDA's programmatic stream
 * serialization). The kernel may then start while the kernel before it in the stream finishes; it
 * waits (griddepcontrol.wait) for that kernel's completion and memory before its first global
 * memory access, and lets the kernel after it start once its last tile's main loop is done.
 * Honoured by the SM90 kernels built with CUTLASS's grid dependency control (persistent and
 * non-persistent data-parallel schedulers, no blockwise scales); ignored by the others. */
#define CUTLASS_RS_LAUNCH_PDL 1

typedef int (*cutlass_rs_can_implement_fn)(const cutlass_rs_gemm_args *args);
typedef int (*cutlass_rs_workspace_size_fn)(const cutlass_rs_gemm_args *args, size_t *bytes);
typedef int (*cutlass_rs_run_fn)(const cutlass_rs_gemm_args *args, void *workspace,
                                 size_t workspace_bytes, void *stream);
/* Everything run() does on the host before the launch: can_implement, the workspace-size check and
 * the kernel parameters (TMA descriptors included); launches nothing, touches no device memory. */
typedef int (*cutlass_rs_prepare_fn)(const cutlass_rs_gemm_args *args, void *workspace,
                                     size_t workspace_bytes);
/* Launches the kernel again with the arguments, workspace and kernel parameters of this thread's
 * last successful run() of it, without run()'s checks: a bare launch, which is what
 * `cutlass-profiler overhead` measures run() against. CUTLASS_RS_ERROR_INVALID if this thread has
 * not run the kernel (or its last run failed). The buffers of that run must still be live. */
typedef int (*cutlass_rs_relaunch_fn)(void *stream);

/* Counts, for the calling thread, how often a run() built a kernel's launch state anew rather than
 * reusing it (defined with the registry; run() calls it). */
void cutlass_rs_note_launch_state_build(void);

/* One compiled kernel: its procedural name (the catalog's) and its entry points. */
typedef struct cutlass_rs_kernel_entry {
  const char *name;
  cutlass_rs_can_implement_fn can_implement;
  cutlass_rs_workspace_size_fn workspace_size;
  cutlass_rs_run_fn run;
  cutlass_rs_prepare_fn prepare;
  cutlass_rs_relaunch_fn relaunch;
} cutlass_rs_kernel_entry;

/* Element types of the quantization entry points. */
#define CUTLASS_RS_DTYPE_F32 0
#define CUTLASS_RS_DTYPE_F16 1
#define CUTLASS_RS_DTYPE_BF16 2
#define CUTLASS_RS_DTYPE_E4M3 3
#define CUTLASS_RS_DTYPE_E5M2 4
#define CUTLASS_RS_DTYPE_E2M3 5
#define CUTLASS_RS_DTYPE_E3M2 6
#define CUTLASS_RS_DTYPE_E2M1 7

#ifdef __cplusplus
}
#endif

#endif /* CUTLASS_RS_ABI_H */
