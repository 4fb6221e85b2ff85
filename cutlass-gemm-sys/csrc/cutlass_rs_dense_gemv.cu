// The 16-bit decode GEMV: D = alpha . X . W^T + beta . C (and the fused epilogue) in bf16 or f16 for a few tokens
// (m <= CUTLASS_RS_DENSE_GEMV_MAX_TOKENS), a linear layer at decode, where reading the weight once
// at the speed of memory is the whole cost and the CUTLASS tiles leave SMs idle or re-read the
// weight (the swapped 64x8 tile: 72 CTAs for a 4608-row weight). Hand-written, not generated;
// compiled by cutlass-gemm-sys's build script for every selected architecture (it needs sm_80's
// mma.sync only). The C ABI is in cutlass_rs_dense_gemv_abi.h.
//
// The shape of the FP8 GEMVs (cutlass_rs_weight_gemv.cu, cutlass_rs_blockwise_gemv.cu) without
// their conversions, with the fused CUTLASS kernels' epilogue (scales per token and per output
// feature, a bias along either, an activation: cutlass_rs_activation.cuh, as they compute it): a block owns a slice of 16 rows of W; its warps share k in runs of 64 columns
// (two chunks of 32), warp u taking the runs u, u + warps, .... In a chunk, lane l reads the 16
// bytes (8 values) at columns 8 (l % 4) of its slice's rows l / 4 and l / 4 + 8, and the 16 bytes
// of X at the same columns for token l / 4 of each group of 8; words 2 j and 2 j + 1 of each are
// the lane's A and B registers of MMA j (m16n8k16; the order of k within a chunk is free as long
// as X's follows W's). The products are exact and summed in f32, as the CUTLASS kernels do (in
// another order); NaN and infinities propagate through the MMA. The next run's loads are in flight
// while the warp multiplies one. The warps add their partial sums in shared memory in a fixed
// order: the result does not depend on timing. No workspace, no second launch.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"
#include "cutlass_rs_activation.cuh"
#include "cutlass_rs_dense_gemv_abi.h"
#include "cutlass_rs_gemv_fragments.cuh"

namespace {

using namespace cutlass_rs::gemv;

constexpr int kMaxWarps = 16;
// Columns of k per chunk (8 values a lane) and per run (two chunks).
constexpr int kChunk = 32;
constexpr int kRun = 64;

template <class T>
struct Params {
  int m, n, k;
  const T *x;
  int64_t ldx;
  const T *w;
  int64_t ldw;
  const T *c;
  int64_t ldc;
  T *d;
  int64_t ldd;
  float alpha, beta;
  // The fused epilogue in D's orientation (rows: tokens; columns: the weight's rows); null: none.
  const float *row_scale, *col_scale;
  // Of D's type, or f32 where bias_f32.
  const void *row_bias, *col_bias;
  int activation;
  bool bias_f32;
};

// Element i of a bias vector of D's type T, or of f32.
template <class T>
__device__ inline float bias_at(const void *bias, bool f32, int64_t i) {
  return f32 ? static_cast<const float *>(bias)[i] : Convert<T>::to_float(static_cast<const T *>(bias)[i]);
}

// D[token][row] = act(alpha . row_scale[token] . col_scale[row] . v + beta . C[token][row] +
// row_bias[token] + col_bias[row]) for tokens below m: the fused CUTLASS kernels' order.
template <class T>
__device__ inline void write_fused(const Params<T> &p, int row, int token, float v) {
  if (token >= p.m) return;
  float scale = p.alpha;
  if (p.row_scale) scale *= p.row_scale[token];
  if (p.col_scale) scale *= p.col_scale[row];
  v *= scale;
  if (p.beta != 0.f) v += p.beta * Convert<T>::to_float(p.c[int64_t(token) * p.ldc + row]);
  if (p.row_bias) v += bias_at<T>(p.row_bias, p.bias_f32, token);
  if (p.col_bias) v += bias_at<T>(p.col_bias, p.bias_f32, row);
  p.d[int64_t(token) * p.ldd + row] = Convert<T>::from_float(cutlass_rs::activate(v, p.activation));
}

// One block per 16 rows of W; kTokenGroups groups of 8 tokens.
template <class T, int kTokenGroups>
__global__ void __launch_bounds__(kMaxWarps * 32) dense_gemv_kernel(const Params<T> p) {
  extern __shared__ float partial[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int quad = lane & 3, row = lane >> 2;
  const int row0 = blockIdx.x * 16;
  const T *w = p.w + int64_t(row0 + row) * p.ldw + quad * 8;
  const int64_t rows8 = int64_t(8) * p.ldw;
  // The lane's token of each group (the one it loads), or none past m.
  const T *x[kTokenGroups];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const int token = t * 8 + row;
    x[t] = token < p.m ? p.x + int64_t(token) * p.ldx + quad * 8 : nullptr;
  }
  const int runs = p.k / kRun;
  // One run's words: W's rows l / 4 and l / 4 + 8 (h) of each chunk (u), X's token of each group.
  struct Operands {
    uint4 w[2][2], x[2][kTokenGroups];
  };
  auto load = [&](int run, Operands &o) {
    const bool live = run < runs;
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int64_t col = int64_t(run) * kRun + u * kChunk;
#pragma unroll
      for (int h = 0; h < 2; ++h) o.w[u][h] = live ? load_streaming(w + h * rows8 + col) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t)
        o.x[u][t] = live && x[t] ? __ldg(reinterpret_cast<const uint4 *>(x[t] + col)) : make_uint4(0, 0, 0, 0);
    }
  };
  float acc[kTokenGroups][4] = {};
  Operands cur, next;
  load(warp, cur);
  for (int run = warp; run < runs; run += warps) {
    load(run + warps, next);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const uint32_t lo[4] = {cur.w[u][0].x, cur.w[u][0].y, cur.w[u][0].z, cur.w[u][0].w};
      const uint32_t hi[4] = {cur.w[u][1].x, cur.w[u][1].y, cur.w[u][1].z, cur.w[u][1].w};
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const uint32_t a[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
#pragma unroll
        for (int t = 0; t < kTokenGroups; ++t) {
          const uint32_t xw[4] = {cur.x[u][t].x, cur.x[u][t].y, cur.x[u][t].z, cur.x[u][t].w};
          mma<T>(acc[t], a, xw[2 * j], xw[2 * j + 1], acc[t]);
        }
      }
    }
    cur = next;
  }
  sum_warps<kTokenGroups>(acc, partial, warp, lane, warps,
                          [&](int r, int token, float v) { write_fused<T>(p, row0 + r, token, v); });
}

template <class T>
int launch(const cutlass_rs_dense_gemv_args &a, cudaStream_t stream) {
  Params<T> p;
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.x = static_cast<const T *>(a.x);
  p.ldx = a.ldx;
  p.w = static_cast<const T *>(a.w);
  p.ldw = a.ldw;
  p.c = static_cast<const T *>(a.c);
  p.ldc = a.ldc;
  p.d = static_cast<T *>(a.d);
  p.ldd = a.ldd;
  p.alpha = a.alpha;
  p.beta = a.beta;
  p.row_scale = a.row_scale;
  p.col_scale = a.col_scale;
  p.row_bias = a.row_bias;
  p.col_bias = a.col_bias;
  p.activation = a.activation;
  p.bias_f32 = a.bias_f32 != 0;
  const int64_t sms = a.sm_count > 0 ? a.sm_count : 1;
  // For two and three groups the warps divide the runs (the FP8 GEMVs' rule).
  return by_token_groups(p.m, [&](auto groups) {
    constexpr int kTokenGroups = decltype(groups)::value;
    constexpr bool kBalanced = kTokenGroups == 2 || kTokenGroups == 3;
    return launch_gemv(dense_gemv_kernel<T, kTokenGroups>, p.n / 16, p.k / kRun, sms, kBalanced ? 16 : 32, kBalanced,
                       size_t(kTokenGroups) * 4 * 32 * sizeof(float), a.device_id, stream, p);
  });
}

int check(const cutlass_rs_dense_gemv_args *a, int32_t dtype) {
  if (a == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (dtype != CUTLASS_RS_DTYPE_BF16 && dtype != CUTLASS_RS_DTYPE_F16) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  if (a->x == nullptr || a->w == nullptr || a->d == nullptr || (a->beta != 0.f && a->c == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (a->m < 1 || a->m > CUTLASS_RS_DENSE_GEMV_MAX_TOKENS || a->n < 16 || a->n % 16 != 0 || a->k < 64 ||
      a->k % 64 != 0 || a->n > INT32_MAX || a->k > INT32_MAX || a->n * a->k > INT32_MAX || a->ldx < a->k ||
      a->ldw < a->k || a->ldd < a->n || (a->c != nullptr && a->ldc < a->n))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (a->activation < CUTLASS_RS_ACTIVATION_IDENTITY || a->activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  // The epilogue's vectors are read element by element: aligned to their elements.
  const int bias_align = a->bias_f32 != 0 ? 4 : 2;
  if ((a->row_scale != nullptr && !aligned(a->row_scale, 4)) || (a->col_scale != nullptr && !aligned(a->col_scale, 4)) ||
      (a->row_bias != nullptr && !aligned(a->row_bias, bias_align)) ||
      (a->col_bias != nullptr && !aligned(a->col_bias, bias_align)))
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  if (!aligned(a->x, 16) || a->ldx % 8 != 0 || !aligned(a->w, 16) || a->ldw % 8 != 0)
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  return CUTLASS_RS_OK;
}

}  // namespace

extern "C" int cutlass_rs_dense_gemv(const cutlass_rs_dense_gemv_args *args, int32_t dtype, int32_t launch_it,
                                     void *stream) {
  const int status = check(args, dtype);
  if (status != CUTLASS_RS_OK || !launch_it) return status;
  int current = -1;
  const cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  if (current != args->device_id) return CUTLASS_RS_ERROR_WRONG_DEVICE;
  auto s = static_cast<cudaStream_t>(stream);
  return dtype == CUTLASS_RS_DTYPE_BF16 ? launch<__nv_bfloat16>(*args, s) : launch<__half>(*args, s);
}
