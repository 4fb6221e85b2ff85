// The FP8 blockwise decode GEMV: the blockwise GEMM of the DeepSeek-V3 recipe (X e4m3 with a scale
// per token and 128 columns of k, W e4m3 with one per 128 x 128 block) for a few tokens
// (m <= CUTLASS_RS_BLOCKWISE_GEMV_MAX_TOKENS), where reading the weight once at the speed of memory
// is the whole cost: the CUTLASS kernel's 128 x 128 tiles leave most SMs idle on such problems (28
// tiles for a 3584-row weight) or pay stream-K's reduction. Hand-written, not generated; compiled
// by cutlass-gemm-sys's build script for every selected architecture (it needs sm_80's mma.sync
// only). The C ABI is in cutlass_rs_blockwise_gemv_abi.h.
//
// The shape of the weight-only FP8 GEMV (cutlass_rs_weight_gemv.cu): a block owns kSlices slices of
// 16 rows of W; its warps share k in runs of one k-block (two chunks of 64 columns), warp u taking
// the k-blocks u, u + warps, .... In a chunk, lane l reads the 16 bytes at columns 16 (l % 4) of
// its slice's rows l / 4 and l / 4 + 8 and the 16 bytes of X at the same columns for token l / 4 of
// each group of 8; word j of each (columns 16 (l % 4) + 4 j + 0..3) feeds MMA j (m16n8k16, A the
// weight, B the tokens) once four logic operations have turned its bytes into f16 pairs of 2^-8
// times their values (exact, subnormals included). The MMAs' f32 sums over a k-block are 2^-16
// times the exact products' sums, exactly where those are exact; the k-block's scales then
// multiply each once, accum += (2^16 sum) * (sx * sw), the expression of CUTLASS's blockwise main
// loop.
//
// e4m3's NaN bytes convert to finite values, so the lanes note them (three operations a word) and the
// outputs of a NaN token or row are made NaN before the warps' sums are added. The warps add their
// partial sums in shared memory in a fixed order: the result does not depend on timing. No
// workspace, no second launch.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"
#include "cutlass_rs_blockwise_gemv_abi.h"
#include "cutlass_rs_gemv_fragments.cuh"

namespace {

using namespace cutlass_rs::gemv;

constexpr int kMaxWarps = 16;
// Columns of k per chunk (four m16n8k16 MMAs) and per k-block (one scale of X and W).
constexpr int kChunk = 64;
constexpr int kBlockK = 128;

template <class T>
struct Params {
  int m, n, k;
  const uint8_t *x;
  int64_t ldx;
  const float *sx;
  const uint8_t *w;
  int64_t ldw;
  const float *sw;
  const T *c;
  int64_t ldc;
  T *d;
  int64_t ldd;
  float alpha, beta;
};

// A byte's low seven bits plus one: 0x80 exactly where the byte is e4m3's NaN (0x7F or 0xFF),
// below it elsewhere (no carry leaves a byte). OR-ed over words, bit 7 of some byte tells that one
// of them held a NaN byte (nan_seen).
__device__ inline uint32_t nan_probe(uint32_t q) { return (q & 0x7F7F7F7Fu) + 0x01010101u; }
__device__ inline bool nan_seen(uint32_t probes) { return (probes & 0x80808080u) != 0; }

// One chunk's products of the lane's weight words (rows l / 4 and l / 4 + 8 of each slice) and X
// words (token l / 4 of each group), added to the k-block's sums.
template <int kSlices, int kTokenGroups>
__device__ inline void multiply(const uint4 (&wv)[kSlices][2], const uint4 (&xv)[kTokenGroups],
                                float (&sum)[kSlices][kTokenGroups][4]) {
  // B of MMA j: X's bytes 4 j + (0, 2) and 4 j + (1, 3) of the lane's 16, as e4m3_pairs pairs them.
  uint32_t b[kTokenGroups][4][2];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const uint32_t v[4] = {xv[t].x, xv[t].y, xv[t].z, xv[t].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) e4m3_pairs_f16_scaled_down(v[j], b[t][j][0], b[t][j][1]);
  }
#pragma unroll
  for (int r = 0; r < kSlices; ++r) {
    const uint32_t lo[4] = {wv[r][0].x, wv[r][0].y, wv[r][0].z, wv[r][0].w};
    const uint32_t hi[4] = {wv[r][1].x, wv[r][1].y, wv[r][1].z, wv[r][1].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t a[4];
      e4m3_pairs_f16_scaled_down(lo[j], a[0], a[2]);
      e4m3_pairs_f16_scaled_down(hi[j], a[1], a[3]);
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t) mma<__half>(sum[r][t], a, b[t][j][0], b[t][j][1], sum[r][t]);
    }
  }
}

// One block per kSlices x 16 rows of W; kTokenGroups groups of 8 tokens.
template <class T, int kSlices, int kTokenGroups>
__global__ void __launch_bounds__(kMaxWarps * 32) blockwise_gemv_kernel(const Params<T> p) {
  extern __shared__ float partial[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int quad = lane & 3, row = lane >> 2;
  const int row0 = blockIdx.x * kSlices * 16;
  const uint8_t *w = p.w + int64_t(row0 + row) * p.ldw + quad * 16;
  const int64_t rows8 = int64_t(8) * p.ldw;
  // The lane's token of each group (the one it loads), or none past m.
  const uint8_t *x[kTokenGroups];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const int token = t * 8 + row;
    x[t] = token < p.m ? p.x + int64_t(token) * p.ldx + quad * 16 : nullptr;
  }
  const int chunks = p.k / kChunk, kblocks = (p.k + kBlockK - 1) / kBlockK;
  const int nb = (p.n + kBlockK - 1) / kBlockK;
  float acc[kSlices][kTokenGroups][4] = {};
  // NaN bytes seen in the lane's words: of W's rows (slice, half), of X's token (group).
  uint32_t w_nan[kSlices][2] = {}, x_nan[kTokenGroups] = {};
  // One k-block's operands in registers: W's words (two chunks), X's, and the scales (W's for
  // each slice's 128-row block, X's for the lane's two tokens of each group: the accumulator's
  // columns 2 (l % 4) and 2 (l % 4) + 1).
  struct Operands {
    uint4 w[2][kSlices][2], x[2][kTokenGroups];
    float sw[kSlices], sx[kTokenGroups][2];
  };
  auto load = [&](int kb, Operands &o) {
    const bool live = kb < kblocks;
#pragma unroll
    for (int r = 0; r < kSlices; ++r) o.sw[r] = live ? __ldg(p.sw + int64_t(kb) * nb + (row0 + r * 16) / kBlockK) : 0.f;
#pragma unroll
    for (int t = 0; t < kTokenGroups; ++t)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int token = t * 8 + quad * 2 + e;
        o.sx[t][e] = live && token < p.m ? __ldg(p.sx + int64_t(kb) * p.m + token) : 0.f;
      }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int chunk = 2 * kb + u;
      const bool in = live && chunk < chunks;
#pragma unroll
      for (int r = 0; r < kSlices; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          o.w[u][r][h] = in ? load_streaming(w + (2 * r + h) * rows8 + int64_t(chunk) * kChunk) : make_uint4(0, 0, 0, 0);
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t)
        o.x[u][t] = in && x[t] ? __ldg(reinterpret_cast<const uint4 *>(x[t] + int64_t(chunk) * kChunk)) : make_uint4(0, 0, 0, 0);
    }
  };
  // The next k-block's loads are in flight while the warp multiplies one.
  Operands cur, next;
  load(warp, cur);
  for (int kb = warp; kb < kblocks; kb += warps) {
    load(kb + warps, next);
    float sum[kSlices][kTokenGroups][4] = {};
#pragma unroll
    for (int u = 0; u < 2; ++u) {
#pragma unroll
      for (int r = 0; r < kSlices; ++r)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          w_nan[r][h] |= nan_probe(cur.w[u][r][h].x) | nan_probe(cur.w[u][r][h].y) | nan_probe(cur.w[u][r][h].z) |
                         nan_probe(cur.w[u][r][h].w);
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t)
        x_nan[t] |= nan_probe(cur.x[u][t].x) | nan_probe(cur.x[u][t].y) | nan_probe(cur.x[u][t].z) |
                    nan_probe(cur.x[u][t].w);
      multiply<kSlices, kTokenGroups>(cur.w[u], cur.x[u], sum);
    }
    // accum += sum * (sx * sw), the sum 2^16 times the MMAs' (exact: a power of two).
#pragma unroll
    for (int r = 0; r < kSlices; ++r) {
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t) {
        const float s0 = cur.sx[t][0] * cur.sw[r], s1 = cur.sx[t][1] * cur.sw[r];
        acc[r][t][0] = fmaf(sum[r][t][0] * 65536.f, s0, acc[r][t][0]);
        acc[r][t][1] = fmaf(sum[r][t][1] * 65536.f, s1, acc[r][t][1]);
        acc[r][t][2] = fmaf(sum[r][t][2] * 65536.f, s0, acc[r][t][2]);
        acc[r][t][3] = fmaf(sum[r][t][3] * 65536.f, s1, acc[r][t][3]);
      }
    }
    cur = next;
  }
  // NaN rows: any lane of the quad (the row's four column ranges); NaN tokens: any lane of the
  // token's quad (ballot bits 4 j .. 4 j + 3 for token j of the group).
  const float nan = __int_as_float(0x7FC00000);
#pragma unroll
  for (int r = 0; r < kSlices; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t f = nan_seen(w_nan[r][h]);
      f |= __shfl_xor_sync(0xFFFFFFFFu, f, 1);
      f |= __shfl_xor_sync(0xFFFFFFFFu, f, 2);
      if (f)
#pragma unroll
        for (int t = 0; t < kTokenGroups; ++t) acc[r][t][2 * h] = acc[r][t][2 * h + 1] = nan;
    }
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const uint32_t tokens = __ballot_sync(0xFFFFFFFFu, nan_seen(x_nan[t]));
#pragma unroll
    for (int e = 0; e < 2; ++e)
      if ((tokens >> (4 * (quad * 2 + e))) & 0xFu)
#pragma unroll
        for (int r = 0; r < kSlices; ++r) acc[r][t][e] = acc[r][t][e + 2] = nan;
  }
  // The warps' sums, then the epilogue.
  sum_warps<kTokenGroups>(acc[0], partial, warp, lane, warps,
                          [&](int r, int token, float v) { write_output<T>(p, row0 + r, token, v); });
}

template <class T>
int launch(const cutlass_rs_blockwise_gemv_args &a, cudaStream_t stream) {
  Params<T> p;
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.x = static_cast<const uint8_t *>(a.x);
  p.ldx = a.ldx;
  p.sx = a.scales_x;
  p.w = static_cast<const uint8_t *>(a.w);
  p.ldw = a.ldw;
  p.sw = a.scales_w;
  p.c = static_cast<const T *>(a.c);
  p.ldc = a.ldc;
  p.d = static_cast<T *>(a.d);
  p.ldd = a.ldd;
  p.alpha = a.alpha;
  p.beta = a.beta;
  const int64_t sms = a.sm_count > 0 ? a.sm_count : 1;
  // One slice a block (two for two groups spilled registers); for two and three groups the warps
  // divide the k-blocks.
  return by_token_groups(p.m, [&](auto groups) {
    constexpr int kTokenGroups = decltype(groups)::value;
    constexpr bool kBalanced = kTokenGroups == 2 || kTokenGroups == 3;
    return launch_gemv(blockwise_gemv_kernel<T, 1, kTokenGroups>, p.n / 16, (p.k + kBlockK - 1) / kBlockK, sms,
                       kBalanced ? 16 : 32, kBalanced, size_t(kTokenGroups) * 4 * 32 * sizeof(float), a.device_id,
                       stream, p);
  });
}

int check(const cutlass_rs_blockwise_gemv_args *a, int32_t d_dtype) {
  if (a == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (d_dtype != CUTLASS_RS_DTYPE_BF16 && d_dtype != CUTLASS_RS_DTYPE_F16) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  if (a->x == nullptr || a->w == nullptr || a->scales_x == nullptr || a->scales_w == nullptr || a->d == nullptr ||
      (a->beta != 0.f && a->c == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (a->m < 1 || a->m > CUTLASS_RS_BLOCKWISE_GEMV_MAX_TOKENS || a->n < 16 || a->n % 16 != 0 || a->k < 64 ||
      a->k % 64 != 0 || a->n > INT32_MAX || a->k > INT32_MAX || a->n * a->k > INT32_MAX || a->ldx < a->k ||
      a->ldw < a->k || a->ldd < a->n || (a->c != nullptr && a->ldc < a->n))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (!aligned(a->x, 16) || a->ldx % 16 != 0 || !aligned(a->w, 16) || a->ldw % 16 != 0 || !aligned(a->scales_x, 4) ||
      !aligned(a->scales_w, 4))
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  return CUTLASS_RS_OK;
}

}  // namespace

extern "C" int cutlass_rs_blockwise_gemv(const cutlass_rs_blockwise_gemv_args *args, int32_t d_dtype,
                                         int32_t launch_it, void *stream) {
  const int status = check(args, d_dtype);
  if (status != CUTLASS_RS_OK || !launch_it) return status;
  int current = -1;
  const cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  if (current != args->device_id) return CUTLASS_RS_ERROR_WRONG_DEVICE;
  auto s = static_cast<cudaStream_t>(stream);
  return d_dtype == CUTLASS_RS_DTYPE_BF16 ? launch<__nv_bfloat16>(*args, s) : launch<__half>(*args, s);
}
