// The weight-only decode GEMV: Y = act(alpha . X . dequant(W)^T + beta . C + ...) for a few tokens
// (m <= CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS), where reading the 4-bit weight once at the speed of
// memory is the whole cost. Hand-written, not generated; compiled by cutlass-gemm-sys's build
// script for every selected architecture (it needs sm_80's mma.sync only). The C ABI is in
// cutlass_rs_weight_only_abi.h; the arithmetic is the weight-only kernels' (the same dequantized
// values, f32 accumulation, the same fused epilogue).
//
// It reads the packed weight the CUTLASS kernels read (cutlass_rs_weight_layout.hpp): a 16 x 16
// block of W (rows x k) is 128 contiguous bytes, lane t's eight values in the 32-bit word t, which
// is exactly lane t's part of an mma.sync.m16n8k16 A operand. So a warp loads a block with one
// coalesced 32-bit load per lane, converts it in registers (two values per instruction, nibbles
// 0 and 4 of a word being the pair of one A register) and multiplies it with X's tokens as B
// (8 tokens per MMA), X staged through shared memory in B operand order. A warp carries two
// 16-row slices, so that one staging of X and one loop's overhead serve twice the weight (the
// kernel is bound by instruction issue, not by memory, at these sizes). A thread block owns those
// 32 rows; its warps split k by chunks of 64 columns and add their partial sums in shared memory in
// a fixed order, so the result does not depend on timing. No workspace, no second launch.

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass/numeric_types.h"
#include "cutlass_rs_abi.h"
#include "cutlass_rs_activation.cuh"
#include "cutlass_rs_weight_layout.hpp"
#include "cutlass_rs_weight_only_abi.h"

namespace {

constexpr int kMinWarps = 4;
constexpr int kMaxWarps = 16;
// Dynamic shared memory: what a block may take without opting in, and the most it takes.
constexpr size_t kDefaultShared = 48 * 1024;
constexpr size_t kMaxShared = 96 * 1024;

// The kernel's arguments, with the packed layout's strides between blocks resolved on the host.
template <class T>
struct Params {
  int m, n, k, group_size;
  const T *x;
  int64_t ldx;
  const uint32_t *w;
  // Words between the blocks of consecutive 16-row slices, and of consecutive 16-column slices.
  int64_t block_row_words, block_col_words;
  const T *scales, *zeros;
  const T *c;
  int64_t ldc;
  T *d;
  int64_t ldd;
  const float *row_scale, *col_scale;
  const T *row_bias, *col_bias;
  float alpha, beta;
  int activation;
  // 64 / group_size: a chunk's group without an integer division.
  double chunks_per_group_inv;
};

// 16-bit pairs: the type, the exponent pattern that turns a nibble q into 2^e + q, and 2^e.
template <class T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using T2 = __nv_bfloat162;
  static constexpr uint32_t kMagic = 0x43004300u;  // 128.0: values 128 + q are exact
  static constexpr uint32_t kMagicPlus8 = 0x43084308u;  // 136.0
  static __device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
  static __device__ T2 splat(__nv_bfloat16 v) { return __bfloat162bfloat162(v); }
};
template <>
struct Pair<__half> {
  using T2 = __half2;
  static constexpr uint32_t kMagic = 0x64006400u;  // 1024.0
  static constexpr uint32_t kMagicPlus8 = 0x64086408u;  // 1032.0
  static __device__ float to_float(__half v) { return __half2float(v); }
  static __device__ __half from_float(float v) { return __float2half_rn(v); }
  static __device__ T2 splat(__half v) { return __half2half2(v); }
};

template <class T2>
__device__ inline T2 as_pair(uint32_t v) {
  return *reinterpret_cast<T2 *>(&v);
}
template <class T2>
__device__ inline uint32_t as_word(T2 v) {
  return *reinterpret_cast<uint32_t *>(&v);
}

// A weight word, streamed: not kept in L1, with L2 fetching the next 128 bytes too (the adjacent
// 16 rows, read at the same time).
__device__ inline uint32_t load_weight(const uint32_t *p) {
  uint32_t v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.b32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

template <class T>
__device__ inline void mma(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ inline void mma<__nv_bfloat16>(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ inline void mma<__half>(float (&acc)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Lane t's four A registers from its word of a packed block: register i holds the values of
// nibbles i and i + 4 (rows t/4 for even i, t/4 + 8 for odd i), dequantized as the CUTLASS
// kernels do: q * s + z rounded once to T (z = 0 without zero points).
template <class T, bool kZeros>
__device__ inline void dequantize(uint32_t q, typename Pair<T>::T2 s0, typename Pair<T>::T2 s1,
                                  typename Pair<T>::T2 z0, typename Pair<T>::T2 z1, uint32_t (&a)[4]) {
  using T2 = typename Pair<T>::T2;
  // Signed values: q ^ 8 = q + 8 in [0, 15].
  if (!kZeros) q ^= 0x88888888u;
  const T2 bias = as_pair<T2>(kZeros ? Pair<T>::kMagic : Pair<T>::kMagicPlus8);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t h = ((q >> (4 * i)) & 0x000F000Fu) | Pair<T>::kMagic;
    const T2 v = __hsub2(as_pair<T2>(h), bias);  // exact: the 4-bit value
    const T2 s = (i & 1) ? s1 : s0;
    if constexpr (kZeros) {
      a[i] = as_word(__hfma2(v, s, (i & 1) ? z1 : z0));
    } else {
      a[i] = as_word(__hmul2(v, s));
    }
  }
}

// 32-bit words of a warp's staging area for one chunk of X (64 columns of k, 8 tokens per token
// group): four blocks of 16 columns, each the warps' B operands in lane order (two words a lane
// and token group), padded by two words so that the stores below hit 32 distinct banks.
template <int kTokenGroups>
constexpr int stage_block_words() {
  return kTokenGroups * 64 + 2;
}

// 16-row slices of W per warp: one staging of X serves them all.
constexpr int kSlices = 2;

// What a warp reads for one chunk (64 columns of k of its kSlices x 16 rows): a word of W per
// 16 x 16 block, the rows' scales and zeros, and X's 8 * kTokenGroups rows of those columns, 16
// bytes per lane and load.
template <class T, int kTokenGroups>
struct Chunk {
  uint32_t q[kSlices][4];
  T s[kSlices][2], z[kSlices][2];
  uint4 x[2 * kTokenGroups];
};

template <class T, bool kZeros, int kTokenGroups>
__device__ inline void load_chunk(const Params<T> &p, const uint32_t *w, const int64_t (&offset)[kSlices],
                                  const int (&row)[kSlices], int chunk, int lane, Chunk<T, kTokenGroups> &c) {
#pragma unroll
  for (int r = 0; r < kSlices; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) c.q[r][j] = load_weight(w + offset[r] + (chunk * 4 + j) * p.block_col_words);
  // The group of the chunk's columns (chunk * 64 / group_size, without an integer division).
  const int group = __double2int_rz((chunk + 0.5) * p.chunks_per_group_inv);
  const int64_t at = int64_t(group) * p.n;
#pragma unroll
  for (int r = 0; r < kSlices; ++r) {
    c.s[r][0] = p.scales[at + row[r]];
    c.s[r][1] = p.scales[at + row[r] + 8];
    if constexpr (kZeros) {
      c.z[r][0] = p.zeros[at + row[r]];
      c.z[r][1] = p.zeros[at + row[r] + 8];
    }
  }
  // Load u: tokens 4 u + lane / 8, columns 8 (lane % 8) to 8 (lane % 8) + 7 of the chunk.
#pragma unroll
  for (int u = 0; u < 2 * kTokenGroups; ++u) {
    const int token = u * 4 + (lane >> 3);
    c.x[u] = token < p.m ? __ldg(reinterpret_cast<const uint4 *>(p.x + token * p.ldx + chunk * 64 + (lane & 7) * 8))
                         : make_uint4(0, 0, 0, 0);
  }
}

// One block per kSlices x 16 rows of W (the last block's rows past n repeat its first slice's
// and are not stored); kTokenGroups groups of 8 tokens. Warp u takes the chunks u, u + warps, ...
// of k, loading the next while it multiplies one.
template <class T, bool kZeros, int kTokenGroups>
__global__ void __launch_bounds__(kMaxWarps * 32) gemv_kernel(const Params<T> p) {
  using T2 = typename Pair<T>::T2;
  constexpr int kStage = stage_block_words<kTokenGroups>();
  // Each warp's staging area for X (4 kStage words); the warps' partial sums
  // ([warps][kSlices][kTokenGroups][4][32] floats, fewer words) reuse it at the end.
  extern __shared__ uint32_t shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int slices = p.n / 16;
  int slice[kSlices], row[kSlices];
#pragma unroll
  for (int r = 0; r < kSlices; ++r) {
    slice[r] = blockIdx.x * kSlices + r;
    if (slice[r] >= slices) slice[r] = blockIdx.x * kSlices;
    row[r] = slice[r] * 16 + (lane >> 2);
  }
  const uint32_t *w = p.w + slice[0] * p.block_row_words + lane;
  uint32_t *stage = shared + warp * 4 * kStage;
  const int chunks = p.k / 64;
  float acc[kSlices][kTokenGroups][4] = {};
  // Each slice's words, from the first's (the last block's repeated slice reads the first's).
  int64_t offset[kSlices];
#pragma unroll
  for (int r = 0; r < kSlices; ++r) offset[r] = int64_t(slice[r] - slice[0]) * p.block_row_words;
  Chunk<T, kTokenGroups> cur, next;
  if (warp < chunks) load_chunk<T, kZeros>(p, w, offset, row, warp, lane, cur);
  for (int chunk = warp; chunk < chunks; chunk += warps) {
    if (chunk + warps < chunks) load_chunk<T, kZeros>(p, w, offset, row, chunk + warps, lane, next);
    // X into B operand order: load u's word v (columns 8 (lane % 8) + 2 v, + 1 of token t) is
    // word h = (lane % 8) % 2 of lane (t % 8) * 4 + v in 16-column block (lane % 8) / 2.
    __syncwarp();
#pragma unroll
    for (int u = 0; u < 2 * kTokenGroups; ++u) {
      const int token = u * 4 + (lane >> 3), seg = lane & 7;
      uint32_t *dst = stage + (seg >> 1) * kStage + ((token >> 3) * 32 + (token & 7) * 4) * 2 + (seg & 1);
      dst[0] = cur.x[u].x;
      dst[2] = cur.x[u].y;
      dst[4] = cur.x[u].z;
      dst[6] = cur.x[u].w;
    }
    __syncwarp();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint2 b[kTokenGroups];
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t) b[t] = *reinterpret_cast<const uint2 *>(stage + j * kStage + (t * 32 + lane) * 2);
#pragma unroll
      for (int r = 0; r < kSlices; ++r) {
        const T2 s0 = Pair<T>::splat(cur.s[r][0]), s1 = Pair<T>::splat(cur.s[r][1]);
        const T2 z0 = kZeros ? Pair<T>::splat(cur.z[r][0]) : s0, z1 = kZeros ? Pair<T>::splat(cur.z[r][1]) : s1;
        uint32_t a[4];
        dequantize<T, kZeros>(cur.q[r][j], s0, s1, z0, z1, a);
#pragma unroll
        for (int t = 0; t < kTokenGroups; ++t) mma<T>(acc[r][t], a, b[t].x, b[t].y);
      }
    }
    cur = next;
  }
  // The warps' partial sums, added in warp order.
  __syncthreads();
  float *partial = reinterpret_cast<float *>(shared);
  constexpr int kValues = kSlices * kTokenGroups * 4 * 32;
#pragma unroll
  for (int r = 0; r < kSlices; ++r)
#pragma unroll
    for (int t = 0; t < kTokenGroups; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) partial[warp * kValues + ((r * kTokenGroups + t) * 4 + e) * 32 + lane] = acc[r][t][e];
  __syncthreads();
  for (int i = threadIdx.x; i < kValues; i += blockDim.x) {
    float v = 0.f;
    for (int u = 0; u < warps; ++u) v += partial[u * kValues + i];
    // Accumulator element e of lane l in token group t of slice r: row (l / 4) + 8 (e / 2) of the
    // slice, token 8 t + 2 (l % 4) + e % 2.
    const int l = i & 31, e = (i >> 5) & 3, t = (i >> 7) % kTokenGroups, r = (i >> 7) / kTokenGroups;
    if (blockIdx.x * kSlices + r >= slices) continue;
    const int row_at = (blockIdx.x * kSlices + r) * 16 + (l >> 2) + 8 * (e >> 1);
    const int token = t * 8 + (l & 3) * 2 + (e & 1);
    if (token >= p.m) continue;
    float scale = p.alpha;
    if (p.row_scale) scale *= p.row_scale[row_at];
    if (p.col_scale) scale *= p.col_scale[token];
    v *= scale;
    if (p.beta != 0.f) v += p.beta * Pair<T>::to_float(p.c[token * p.ldc + row_at]);
    if (p.row_bias) v += Pair<T>::to_float(p.row_bias[row_at]);
    if (p.col_bias) v += Pair<T>::to_float(p.col_bias[token]);
    p.d[token * p.ldd + row_at] = Pair<T>::from_float(cutlass_rs::activate(v, p.activation));
  }
}

int cuda_status(cudaError_t e) { return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e); }

// Launches one instantiation, opting in to more than the default dynamic shared memory when the
// block takes it (for the current device, each time: the attribute is the device's).
template <class T>
int start(void (*kernel)(Params<T>), dim3 grid, dim3 block, size_t shared, cudaStream_t stream, const Params<T> &p) {
  if (shared > kDefaultShared) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (e != cudaSuccess) return cuda_status(e);
  }
  kernel<<<grid, block, shared, stream>>>(p);
  return cuda_status(cudaGetLastError());
}

template <class T, bool kZeros>
int launch(const cutlass_rs_weight_only_args &a, cudaStream_t stream) {
  Params<T> p;
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.group_size = static_cast<int>(a.group_size);
  p.x = static_cast<const T *>(a.x);
  p.ldx = a.ldx;
  p.w = static_cast<const uint32_t *>(a.w);
  // The packed layout's offsets (in values) of the blocks next to the first, as words; the
  // kernels' layout must tile its 16 x 16 blocks as whole, lane-ordered 128-byte runs.
  const auto layout = cutlass_rs::weight::packed_layout<cutlass::bfloat16_t>(p.n, p.k);
  const int64_t origin = layout(0, 0, 0);
  p.block_row_words = (int64_t(layout(16, 0, 0)) - origin) / 8;
  p.block_col_words = (int64_t(layout(0, 16, 0)) - origin) / 8;
  p.scales = static_cast<const T *>(a.scales);
  p.zeros = static_cast<const T *>(a.zeros);
  p.c = static_cast<const T *>(a.c);
  p.ldc = a.ldc;
  p.d = static_cast<T *>(a.d);
  p.ldd = a.ldd;
  p.row_scale = a.row_scale;
  p.col_scale = a.col_scale;
  p.row_bias = static_cast<const T *>(a.row_bias);
  p.col_bias = static_cast<const T *>(a.col_bias);
  p.alpha = a.alpha;
  p.beta = a.beta;
  p.activation = a.activation;
  p.chunks_per_group_inv = 64.0 / static_cast<double>(p.group_size);
  // Warps per block: the most (a power of two up to 16) that keeps every block resident at once
  // at 32 warps an SM, never more than the chunks of k to share, within kMaxShared.
  const int blocks = (p.n / 16 + kSlices - 1) / kSlices, chunks = p.k / 64;
  const int64_t sms = a.sm_count > 0 ? a.sm_count : 1;
  const int token_groups = (p.m + 7) / 8;
  const size_t warp_bytes = 4 * (token_groups * 64 + 2) * sizeof(uint32_t);
  int warps = kMinWarps;
  while (warps < kMaxWarps && int64_t(blocks) * warps * 2 <= sms * 32 && warps * 2 <= chunks &&
         warp_bytes * warps * 2 <= kMaxShared)
    warps *= 2;
  const size_t shared = warp_bytes * warps;
  const dim3 grid(blocks), block(warps * 32);
  switch (token_groups) {
    case 1:
      return start(gemv_kernel<T, kZeros, 1>, grid, block, shared, stream, p);
    case 2:
      return start(gemv_kernel<T, kZeros, 2>, grid, block, shared, stream, p);
    case 3:
      return start(gemv_kernel<T, kZeros, 3>, grid, block, shared, stream, p);
    default:
      return start(gemv_kernel<T, kZeros, 4>, grid, block, shared, stream, p);
  }
}

bool aligned(const void *p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The rules of cutlass_rs_weight_gemv's arguments.
int check(const cutlass_rs_weight_only_args *a, int32_t dtype, int32_t zero_points) {
  if (a == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (dtype != CUTLASS_RS_DTYPE_BF16 && dtype != CUTLASS_RS_DTYPE_F16) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  if (zero_points != 0 && zero_points != 1) return CUTLASS_RS_ERROR_INVALID;
  if (a->x == nullptr || a->w == nullptr || a->scales == nullptr || a->d == nullptr ||
      (zero_points && a->zeros == nullptr) || (a->beta != 0.f && a->c == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (!zero_points && a->zeros != nullptr) return CUTLASS_RS_ERROR_INVALID;
  // n * k below 2^31: the packed layout's index (and its strides, computed on the host) are int.
  if (a->m < 1 || a->m > CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS || a->n < 16 || a->n % 16 != 0 || a->k < 64 ||
      a->k % 64 != 0 || a->n > INT32_MAX || a->k > INT32_MAX || a->n * a->k > INT32_MAX || a->group_size < 64 ||
      a->group_size % 64 != 0 || a->k % a->group_size != 0 || a->ldx < a->k || a->ldd < a->n ||
      (a->c != nullptr && a->ldc < a->n))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (a->activation < CUTLASS_RS_ACTIVATION_IDENTITY || a->activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID;
  // X and W are read 16 bytes at a time.
  if (!aligned(a->x, 16) || a->ldx % 8 != 0 || !aligned(a->w, 16)) return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  return CUTLASS_RS_OK;
}

}  // namespace

extern "C" int cutlass_rs_weight_gemv(const cutlass_rs_weight_only_args *args, int32_t dtype, int32_t zero_points,
                                      int32_t launch_it, void *stream) {
  const int status = check(args, dtype, zero_points);
  if (status != CUTLASS_RS_OK || !launch_it) return status;
  int current = -1;
  const cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  if (current != args->device_id) return CUTLASS_RS_ERROR_WRONG_DEVICE;
  auto s = static_cast<cudaStream_t>(stream);
  if (dtype == CUTLASS_RS_DTYPE_BF16) {
    return zero_points ? launch<__nv_bfloat16, true>(*args, s) : launch<__nv_bfloat16, false>(*args, s);
  }
  return zero_points ? launch<__half, true>(*args, s) : launch<__half, false>(*args, s);
}
