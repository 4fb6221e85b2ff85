// The weight-only decode GEMV: Y = act(alpha . X . dequant(W)^T + beta . C + ...) for a few tokens
// (m <= CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS), where reading the 4-bit, FP8 or int8 weight once at the
// speed of memory is the whole cost. Hand-written, not generated; compiled by cutlass-gemm-sys's
// build script for every selected architecture (it needs sm_80's mma.sync and cp.async only). The
// C ABI is in cutlass_rs_weight_prep_abi.h.
//
// It reads the packed weight the CUTLASS kernels read (cutlass_rs_weight_layout.hpp): a 16 x 16
// block of W (rows x k) is 128 contiguous bytes, lane t's eight values in the 32-bit word t, which
// is exactly lane t's part of an mma.sync.m16n8k16 A operand, and the blocks of consecutive 16-row
// slices are consecutive. A thread block owns 16 x kSlices rows; each of its warps takes chunks of
// 64 columns of k (u, u + warps, ...) and multiplies the chunk's blocks with X's tokens as B
// (8 tokens per MMA, by ldmatrix). Everything a chunk needs (its weight blocks, the group's scales
// and zeros, X's columns) reaches a warp's ring in shared memory by cp.async, the next chunk's
// copies in flight while the warp multiplies one: the kernel keeps enough bytes in flight to
// stream the weight near the speed of memory without holding them in registers.
//
// Few instructions per byte of weight: the values enter the MMA as they are stored. One logic
// operation per pair of values puts a nibble u (q + 8 for signed values) into the mantissa of
// M + u (M = 128 in bf16, 1024 in f16, exact), and the MMA's accumulator starts, for each chunk
// (within one group), from -(M + 8) . sum(x) (signed) or -M . sum(x) (zero points), itself one
// MMA per token group and block shared by all of a warp's rows. The chunk's sum is then
// sum(q . x) in f32, and the scale (and, with zero points, z . sum(x)) is applied to it in f32:
//   y += s . sum(q . x) + z . sum(x)
// So the GEMV computes with the exact dequantized values q . s + z, where the CUTLASS kernels
// round each of them to the activations' type first: the two differ by that rounding (and by the
// f32 sums over M + u; cutlass_gemm::reference::weight_only_gemv_error bounds both).
//
// FP8 and int8 weights (e4m3 or s8, row-major, a scale per row) take a kernel of their own, further
// down.
//
// The warps of a block add their partial sums in shared memory in a fixed order, so the result
// does not depend on timing. No workspace, no second launch.

#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "cutlass/numeric_types.h"
#include "cutlass_rs_abi.h"
#include "cutlass_rs_activation.cuh"
#include "cutlass_rs_gemv_fragments.cuh"
#include "cutlass_rs_weight_layout.hpp"
#include "cutlass_rs_weight_prep_abi.h"

namespace {

using namespace cutlass_rs::gemv;

constexpr int kMaxWarps = 16;
// Dynamic shared memory a block may take without opting in.
constexpr size_t kDefaultShared = 48 * 1024;
// Columns of k per chunk: four 16 x 16 blocks.
constexpr int kChunk = 64;
// Chunks a warp's ring holds: the copies of the next kStages - 1 are in flight while it multiplies
// one (on an H200, 2 ran as fast as 3 and 4 with less shared memory).
constexpr int kStages = 2;

// The kernel's arguments, with the packed layout's strides between blocks resolved on the host.
template <class T>
struct Params {
  int m, n, k, group_size;
  const T *x;
  int64_t ldx;
  const uint32_t *w;
  // Words between the blocks of consecutive 16-column slices (those of consecutive 16-row slices
  // are 32 words apart).
  int64_t block_col_words;
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

// 16-bit pairs: the type, the exponent pattern M that turns a nibble u into the exact M + u, and
// the pairs -(M + 8) and -M that start a chunk's accumulator.
template <class T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  static constexpr uint32_t kMagic = 0x43004300u;       // 128.0
  static constexpr uint32_t kMinusMagic8 = 0xC308C308u;  // -136.0
  static constexpr uint32_t kMinusMagic = 0xC300C300u;   // -128.0
  static constexpr float kMagicValue = 128.0f;
  static __device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
  static __device__ __nv_bfloat16 from_float(float v) { return __float2bfloat16_rn(v); }
};
template <>
struct Pair<__half> {
  static constexpr uint32_t kMagic = 0x64006400u;       // 1024.0
  static constexpr uint32_t kMinusMagic8 = 0xE408E408u;  // -1032.0
  static constexpr uint32_t kMinusMagic = 0xE400E400u;   // -1024.0
  static constexpr float kMagicValue = 1024.0f;
  static __device__ float to_float(__half v) { return __half2float(v); }
  static __device__ __half from_float(float v) { return __float2half_rn(v); }
};

// Lane t's four A registers from its word of a packed block: register i holds the values of
// nibbles i and i + 4 (rows t/4 for even i, t/4 + 8 for odd i), each as M + u with u the nibble
// (signed values: the nibble with its top bit flipped, q + 8). One logic operation a register:
// (v & 0x000F000F) ^ (M | flip), the nibble's bits being 0 in M.
template <class T, bool kSigned>
__device__ inline void unpack(uint32_t q, uint32_t (&a)[4]) {
  // In registers, so that each is one lop3 ((v & mask) ^ or: lookup table 0x6a) with no immediate.
  uint32_t mask = 0x000F000Fu, or_ = Pair<T>::kMagic | (kSigned ? 0x00080008u : 0u);
  asm("" : "+r"(mask), "+r"(or_));
#pragma unroll
  for (int i = 0; i < 4; ++i)
    asm("lop3.b32 %0, %1, %2, %3, 0x6a;" : "=r"(a[i]) : "r"(q >> (4 * i)), "r"(mask), "r"(or_));
}

// A warp's ring of kStages slots, each holding what one chunk needs, copied by cp.async (so that
// the copies of the next kStages - 1 chunks are in flight while the warp multiplies one, without
// registers):
//   the weight words: for each of the chunk's four 16 x 16 column blocks, the kSlices consecutive
//     128-byte blocks of the warp's slices as they lie in memory (one copy of 4 kSlices bytes a
//     lane); lane t's word of slice r, block j at word (j kSlices + r) 32 + t;
//   the scales (and zeros) of the chunk's group for the block's 16 kSlices rows;
//   X: 8 kTokenGroups rows (tokens) of the chunk's 64 columns, row-major, each row padded to
//     kRowHalfs values (144 bytes) so that the eight rows an ldmatrix phase reads fall in distinct
//     banks; rows past m are zeros.
constexpr int kRowHalfs = 72;
template <int kSlices, int kTokenGroups>
struct Slot {
  static constexpr int kWeightBytes = kSlices * 4 * 128;
  static constexpr int kScaleBytes = kSlices * 16 * 2;
  static constexpr int kXBytes = kTokenGroups * 8 * kRowHalfs * 2;
  static constexpr int kScales = kWeightBytes;
  static constexpr int kZeros = kScales + kScaleBytes;
  static constexpr int kX = kZeros + kScaleBytes;
  static constexpr int kBytes = kX + kXBytes;
  static_assert(kScales % 16 == 0 && kZeros % 16 == 0 && kX % 16 == 0 && kBytes % 16 == 0, "16-byte pieces");
};

template <int kBytes>
__device__ inline void copy_async(void *dst, const void *src, bool valid) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  // A source size of 0 fills the destination with zeros.
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at), "l"(src), "r"(valid ? 16 : 0));
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(at), "l"(src), "n"(kBytes),
                 "r"(valid ? kBytes : 0));
  }
}
__device__ inline void copy_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ inline void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

__device__ inline void load_matrix_x4(uint32_t (&r)[4], const void *at) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(at));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a)
               : "memory");
}

// What a lane copies for each chunk, the chunk's offsets aside.
template <class T, int kSlices, int kTokenGroups>
struct Copies {
  const uint8_t *w;        // the lane's first weight bytes (chunk 0, block 0)
  int64_t block_col_bytes;  // between consecutive column blocks
  const T *scales, *zeros;  // the lane's 16 bytes of the block's rows in group 0 (lanes < 2 kSlices)
  const T *x[2 * kTokenGroups];
  uint16_t x_at[2 * kTokenGroups];  // bytes into the slot's X
  uint32_t x_valid;                 // bit u: piece u's token is below m
};

template <class T, bool kZeros, int kSlices, int kTokenGroups>
__device__ inline Copies<T, kSlices, kTokenGroups> copies(const Params<T> &p, int lane) {
  Copies<T, kSlices, kTokenGroups> c;
  c.w = reinterpret_cast<const uint8_t *>(p.w) + (int64_t(blockIdx.x) * kSlices * 32 + lane * kSlices) * 4;
  c.block_col_bytes = p.block_col_words * 4;
  const int64_t rows = int64_t(blockIdx.x) * kSlices * 16 + (lane < 2 * kSlices ? lane * 8 : 0);
  c.scales = p.scales + rows;
  c.zeros = kZeros ? p.zeros + rows : nullptr;
  c.x_valid = 0;
#pragma unroll
  for (int u = 0; u < 2 * kTokenGroups; ++u) {
    const int piece = u * 32 + lane, token = piece >> 3, col = (piece & 7) * 8;
    const bool valid = token < p.m;
    c.x[u] = p.x + (valid ? token * p.ldx + col : 0);
    c.x_at[u] = static_cast<uint16_t>(Slot<kSlices, kTokenGroups>::kX + (token * kRowHalfs + col) * 2);
    c.x_valid |= uint32_t(valid) << u;
  }
  return c;
}

// Starts the copies of a chunk into a slot, as one cp.async group.
template <class T, bool kZeros, int kSlices, int kTokenGroups>
__device__ inline void issue(const Params<T> &p, const Copies<T, kSlices, kTokenGroups> &c, uint8_t *slot, int chunk,
                             int lane) {
  using S = Slot<kSlices, kTokenGroups>;
#pragma unroll
  for (int j = 0; j < 4; ++j)
    copy_async<4 * kSlices>(slot + (j * kSlices * 32 + lane * kSlices) * 4,
                            c.w + (int64_t(chunk) * 4 + j) * c.block_col_bytes, true);
  // The group of the chunk's columns (chunk * 64 / group_size, without an integer division).
  const int64_t group_at = int64_t(__double2int_rz((chunk + 0.5) * p.chunks_per_group_inv)) * p.n;
  if (lane < 2 * kSlices) {
    copy_async<16>(slot + S::kScales + lane * 16, c.scales + group_at, true);
    if constexpr (kZeros) copy_async<16>(slot + S::kZeros + lane * 16, c.zeros + group_at, true);
  }
#pragma unroll
  for (int u = 0; u < 2 * kTokenGroups; ++u) {
    const bool valid = (c.x_valid >> u) & 1;
    copy_async<16>(slot + c.x_at[u], c.x[u] + (valid ? chunk * kChunk : 0), valid);
  }
}

// One chunk's products, added to the warp's accumulators.
template <class T, bool kZeros, int kSlices, int kTokenGroups>
__device__ inline void multiply(const uint8_t *slot, int lane, float (&acc)[kSlices][kTokenGroups][4]) {
  using S = Slot<kSlices, kTokenGroups>;
  const uint32_t *words = reinterpret_cast<const uint32_t *>(slot);
  const T *scales = reinterpret_cast<const T *>(slot + S::kScales);
  const T *zeros = reinterpret_cast<const T *>(slot + S::kZeros);
  const uint16_t *x = reinterpret_cast<const uint16_t *>(slot + S::kX);
  // The A operand that starts a chunk's accumulator at -(M + 8) . sum(x) or -M . sum(x).
  constexpr uint32_t kStart = kZeros ? Pair<T>::kMinusMagic : Pair<T>::kMinusMagic8;
  const uint32_t start_a[4] = {kStart, kStart, kStart, kStart};
  const float zero4[4] = {0.f, 0.f, 0.f, 0.f};
  // B operands (X^T, 8 tokens x 16 columns a block) by ldmatrix: matrix i / 8 of load h is
  // columns 8 (i / 8) to 8 (i / 8) + 7 of blocks 2 h and 2 h + 1, lane i giving row i % 8.
  uint32_t b[kTokenGroups][2][4];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h) load_matrix_x4(b[t][h], x + (t * 8 + (lane & 7)) * kRowHalfs + h * 32 + (lane >> 3) * 8);
  // -(M + 8) . sum(x) (or -M . sum(x)) over the chunk, in the accumulator's layout.
  float start[kTokenGroups][4];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    mma<T>(start[t], start_a, b[t][0][0], b[t][0][1], zero4);
    mma<T>(start[t], start_a, b[t][0][2], b[t][0][3], start[t]);
    mma<T>(start[t], start_a, b[t][1][0], b[t][1][1], start[t]);
    mma<T>(start[t], start_a, b[t][1][2], b[t][1][3], start[t]);
  }
#pragma unroll
  for (int r = 0; r < kSlices; ++r) {
    uint32_t q[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) q[j] = words[(j * kSlices + r) * 32 + lane];
    // Accumulator element e holds row (lane / 4) + 8 (e / 2) of the slice.
    const int row = r * 16 + (lane >> 2);
    const float s0 = Pair<T>::to_float(scales[row]), s1 = Pair<T>::to_float(scales[row + 8]);
    float z0 = 0.f, z1 = 0.f;
    if constexpr (kZeros) {
      // z . sum(x) = (z / -M) . (-M . sum(x)), the division exact.
      z0 = Pair<T>::to_float(zeros[row]) * (-1.0f / Pair<T>::kMagicValue);
      z1 = Pair<T>::to_float(zeros[row + 8]) * (-1.0f / Pair<T>::kMagicValue);
    }
    uint32_t a[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) unpack<T, !kZeros>(q[j], a[j]);
#pragma unroll
    for (int t = 0; t < kTokenGroups; ++t) {
      float part[4];
#pragma unroll
      for (int j = 0; j < 4; ++j)
        mma<T>(part, a[j], b[t][j >> 1][(j & 1) * 2], b[t][j >> 1][(j & 1) * 2 + 1], j == 0 ? start[t] : part);
      acc[r][t][0] = fmaf(s0, part[0], acc[r][t][0]);
      acc[r][t][1] = fmaf(s0, part[1], acc[r][t][1]);
      acc[r][t][2] = fmaf(s1, part[2], acc[r][t][2]);
      acc[r][t][3] = fmaf(s1, part[3], acc[r][t][3]);
      if constexpr (kZeros) {
        acc[r][t][0] = fmaf(z0, start[t][0], acc[r][t][0]);
        acc[r][t][1] = fmaf(z0, start[t][1], acc[r][t][1]);
        acc[r][t][2] = fmaf(z1, start[t][2], acc[r][t][2]);
        acc[r][t][3] = fmaf(z1, start[t][3], acc[r][t][3]);
      }
    }
  }
}

// The warps' partial sums (the accumulators of an m16n8k16 MMA: element e of lane l in token group
// t of slice r is row (l / 4) + 8 (e / 2) of the slice, token 8 t + 2 (l % 4) + e % 2), added in
// warp order in shared memory (`partial`, kSlices . kTokenGroups . 512 floats a warp, free for it),
// then the epilogue: Y = act(alpha . row_scale . col_scale . (channel_scale . sum) + beta . C +
// biases), with channel_scale the FP8 weight's per-channel scale (none for 4-bit weights, whose
// scales went into the sums).
template <class T, int kSlices, int kTokenGroups>
__device__ inline void finish(const Params<T> &p, const float (&acc)[kSlices][kTokenGroups][4], float *partial,
                              int warp, int lane, int warps, const T *channel_scale) {
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
    const int l = i & 31, e = (i >> 5) & 3, t = (i >> 7) % kTokenGroups, r = (i >> 7) / kTokenGroups;
    const int row_at = (blockIdx.x * kSlices + r) * 16 + (l >> 2) + 8 * (e >> 1);
    const int token = t * 8 + (l & 3) * 2 + (e & 1);
    if (token >= p.m) continue;
    if (channel_scale) v *= Pair<T>::to_float(channel_scale[row_at]);
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

// One block per kSlices x 16 rows of W (kSlices divides the weight's slices); kTokenGroups groups
// of 8 tokens. Warp u takes the chunks u, u + warps, ... of k, the copies of its next kStages - 1
// chunks in flight while it multiplies one.
template <class T, bool kZeros, int kSlices, int kTokenGroups>
__global__ void __launch_bounds__(kMaxWarps * 32) gemv_kernel(const Params<T> p) {
  using S = Slot<kSlices, kTokenGroups>;
  // Each warp's ring; the warps' partial sums ([warps][kSlices][kTokenGroups][4][32] floats)
  // reuse it at the end.
  extern __shared__ uint4 shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  uint8_t *ring = reinterpret_cast<uint8_t *>(shared) + warp * kStages * S::kBytes;
  const auto c = copies<T, kZeros, kSlices, kTokenGroups>(p, lane);
  const int chunks = p.k / kChunk;
  float acc[kSlices][kTokenGroups][4] = {};
#pragma unroll
  for (int d = 0; d + 1 < kStages; ++d) {
    if (warp + d * warps < chunks) issue<T, kZeros>(p, c, ring + d * S::kBytes, warp + d * warps, lane);
    copy_async_commit();
  }
  int slot = 0;
  for (int chunk = warp; chunk < chunks; chunk += warps) {
    // The slot the copies below fill was last read in the previous iteration.
    __syncwarp();
    const int ahead = chunk + (kStages - 1) * warps;
    const int ahead_slot = slot + kStages - 1 < kStages ? slot + kStages - 1 : slot - 1;
    if (ahead < chunks) issue<T, kZeros>(p, c, ring + ahead_slot * S::kBytes, ahead, lane);
    copy_async_commit();
    copy_async_wait<kStages - 1>();
    __syncwarp();
    multiply<T, kZeros>(ring + slot * S::kBytes, lane, acc);
    slot = slot + 1 < kStages ? slot + 1 : 0;
  }
  // The ring is free once every warp is past its last chunk; the partial sums reuse it.
  static_assert(kSlices * kTokenGroups * 4 * 32 * sizeof(float) <= kStages * S::kBytes, "partial sums fit the ring");
  __syncthreads();
  finish<T, kSlices, kTokenGroups>(p, acc, reinterpret_cast<float *>(shared), warp, lane, warps, nullptr);
}

// FP8 weights (e4m3, n x k row-major, a scale per row; int8 ones, s8, the same way, each word
// converted by s8_pairs instead): no ring in shared memory, the bytes go
// from memory to registers, each warp loading a few chunks (64 columns of k) of its rows before it
// multiplies any. The order of k within a chunk is free (X's values follow the weight's), so a
// 16 x 64 chunk of a 16-row slice is the A operand of four MMAs as the lanes load it: lane l reads
// the 16 bytes at columns 16 (l % 4) of the slice's rows l / 4 and l / 4 + 8 (64 contiguous bytes
// a row for the four lanes of a quad), word j of which (columns 16 (l % 4) + 4 j + 0..3) feeds MMA
// j, and the 16 values of X at the same columns for its token l / 4 of each group of 8 (from L1
// or L2: X is small). e4m3_pairs (cutlass_rs_gemv_fragments.cuh) turns a word's four e4m3 bytes
// into exact 16-bit values paired as (b0, b2) and (b1, b3), so X's values pair the same way (a
// byte permutation a register). The MMAs' f32 sums are the exact products' (e4m3 times a 16-bit
// value is exact in f32); the row's scale multiplies the sum once, in finish.

// The four s8 values of a word (bytes b0 to b3) as the pairs (b0, b2) and (b1, b3) of T, exact.
// With its top bit flipped a byte is u = q + 128 in [0, 255]. f16: the pattern 0x64uu reads
// 1024 + u, and one subtraction of 1152 a pair leaves q. bf16, whose 8 significant bits cannot
// hold 256 + u: the f32 pattern 0x4B0000uu reads 2^23 + u, less 2^23 + 128 it is q, and the top
// half of an f32 integer of at most 8 significant bits is that integer in bf16.
template <class T>
__device__ inline void s8_pairs(uint32_t q, uint32_t &even, uint32_t &odd) {
  const uint32_t u = q ^ 0x80808080u;
  if constexpr (std::is_same_v<T, __half>) {
    const uint32_t bias = 0x64806480u;  // 1152 = 1024 + 128
    uint32_t e = __byte_perm(u, 0x64646464u, 0x4240), o = __byte_perm(u, 0x64646464u, 0x4341);
    const __half2 b = *reinterpret_cast<const __half2 *>(&bias);
    const __half2 he = __hsub2(*reinterpret_cast<__half2 *>(&e), b);
    const __half2 ho = __hsub2(*reinterpret_cast<__half2 *>(&o), b);
    even = *reinterpret_cast<const uint32_t *>(&he);
    odd = *reinterpret_cast<const uint32_t *>(&ho);
  } else {
    uint32_t f[4];
#pragma unroll
    for (int b = 0; b < 4; ++b)
      f[b] = __float_as_uint(__uint_as_float(__byte_perm(u, 0x4B000000u, 0x7440 + b)) - 8388736.0f);
    even = __byte_perm(f[0], f[2], 0x7632);
    odd = __byte_perm(f[1], f[3], 0x7632);
  }
}

// The bytes of a per-channel weight: e4m3 or s8 values.
enum class Byte { kE4m3, kS8 };

template <class T, Byte kByte>
__device__ inline void byte_pairs(uint32_t q, uint32_t &even, uint32_t &odd) {
  if constexpr (kByte == Byte::kE4m3) {
    e4m3_pairs<T>(q, even, odd);
  } else {
    s8_pairs<T>(q, even, odd);
  }
}

// The lane's weight bytes of a chunk (zeros when `in` is false).
template <int kSlices>
__device__ inline void load_fp8_weight(const uint8_t *w, int64_t rows8, int chunk, bool in, uint4 (&wv)[kSlices][2]) {
#pragma unroll
  for (int r = 0; r < kSlices; ++r)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      wv[r][h] = in ? load_streaming(w + (2 * r + h) * rows8 + int64_t(chunk) * kChunk) : make_uint4(0, 0, 0, 0);
}

// The lane's 16 values of X of a chunk for each token group (zeros past m).
template <class T, int kTokenGroups>
__device__ inline void load_fp8_x(const T *const (&x)[kTokenGroups], int chunk, uint4 (&xv)[kTokenGroups][2]) {
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      xv[t][h] = x[t] ? __ldg(reinterpret_cast<const uint4 *>(x[t] + chunk * kChunk) + h) : make_uint4(0, 0, 0, 0);
}

// One chunk's products, added to the warp's accumulators.
template <class T, Byte kByte, int kSlices, int kTokenGroups>
__device__ inline void multiply_fp8(const uint4 (&wv)[kSlices][2], const uint4 (&xv)[kTokenGroups][2],
                                    float (&acc)[kSlices][kTokenGroups][4]) {
  // B of MMA j: X's values 4 j + (0, 2) and 4 j + (1, 3) of the lane's 16, as the bytes pair.
  uint32_t b[kTokenGroups][4][2];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const uint32_t v[8] = {xv[t][0].x, xv[t][0].y, xv[t][0].z, xv[t][0].w,
                           xv[t][1].x, xv[t][1].y, xv[t][1].z, xv[t][1].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      b[t][j][0] = __byte_perm(v[2 * j], v[2 * j + 1], 0x5410);
      b[t][j][1] = __byte_perm(v[2 * j], v[2 * j + 1], 0x7632);
    }
  }
#pragma unroll
  for (int r = 0; r < kSlices; ++r) {
    const uint32_t lo[4] = {wv[r][0].x, wv[r][0].y, wv[r][0].z, wv[r][0].w};
    const uint32_t hi[4] = {wv[r][1].x, wv[r][1].y, wv[r][1].z, wv[r][1].w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      // A: rows l / 4 and l / 4 + 8, the columns B's registers hold.
      uint32_t a[4];
      byte_pairs<T, kByte>(lo[j], a[0], a[2]);
      byte_pairs<T, kByte>(hi[j], a[1], a[3]);
#pragma unroll
      for (int t = 0; t < kTokenGroups; ++t) mma<T>(acc[r][t], a, b[t][j][0], b[t][j][1], acc[r][t]);
    }
  }
}

// One block per kSlices x 16 rows of W; its warps share k in runs of kUnroll consecutive chunks,
// warp u taking the runs u, u + warps, .... Without kPipe it loads a run's weight and X, then
// multiplies them; with kPipe it loads the next run's weight while it multiplies one (and loads X
// as it multiplies).
template <class T, Byte kByte, int kSlices, int kTokenGroups, int kUnroll, bool kPipe>
__global__ void __launch_bounds__(kMaxWarps * 32) gemv_fp8_kernel(const Params<T> p) {
  extern __shared__ uint4 shared[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const int quad = lane & 3, row = lane >> 2;
  const uint8_t *w =
      reinterpret_cast<const uint8_t *>(p.w) + (int64_t(blockIdx.x) * kSlices * 16 + row) * p.k + quad * 16;
  const int64_t rows8 = int64_t(8) * p.k;
  // The lane's token of each token group (its column of B), or none past m.
  const T *x[kTokenGroups];
#pragma unroll
  for (int t = 0; t < kTokenGroups; ++t) {
    const int token = t * 8 + row;
    x[t] = token < p.m ? p.x + token * p.ldx + quad * 16 : nullptr;
  }
  const int chunks = p.k / kChunk, runs = (chunks + kUnroll - 1) / kUnroll;
  // Chunk u of run `run`.
  auto chunk_of = [](int run, int u) { return run * kUnroll + u; };
  float acc[kSlices][kTokenGroups][4] = {};
  if constexpr (!kPipe) {
    for (int run = warp; run < runs; run += warps) {
      uint4 wv[kUnroll][kSlices][2], xv[kUnroll][kTokenGroups][2];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int chunk = chunk_of(run, u);
        load_fp8_weight<kSlices>(w, rows8, chunk, chunk < chunks, wv[u]);
        if (chunk < chunks) load_fp8_x<T, kTokenGroups>(x, chunk, xv[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (chunk_of(run, u) < chunks) multiply_fp8<T, kByte>(wv[u], xv[u], acc);
    }
  } else {
    uint4 wv[kUnroll][kSlices][2];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int chunk = chunk_of(warp, u);
      load_fp8_weight<kSlices>(w, rows8, chunk, warp < runs && chunk < chunks, wv[u]);
    }
    for (int run = warp; run < runs; run += warps) {
      uint4 next[kUnroll][kSlices][2];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int chunk = chunk_of(run + warps, u);
        load_fp8_weight<kSlices>(w, rows8, chunk, run + warps < runs && chunk < chunks, next[u]);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int chunk = chunk_of(run, u);
        if (chunk < chunks) {
          uint4 xv[kTokenGroups][2];
          load_fp8_x<T, kTokenGroups>(x, chunk, xv);
          multiply_fp8<T, kByte>(wv[u], xv, acc);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
#pragma unroll
        for (int r = 0; r < kSlices; ++r) wv[u][r][0] = next[u][r][0], wv[u][r][1] = next[u][r][1];
    }
  }
  finish<T, kSlices, kTokenGroups>(p, acc, reinterpret_cast<float *>(shared), warp, lane, warps, p.scales);
}

// Launches one instantiation, opting in to more than the default dynamic shared memory when the
// block takes it (for the current device, each time: the attribute is the device's).
template <class T>
int start(void (*kernel)(Params<T>), dim3 grid, dim3 block, size_t shared, cudaStream_t stream, const Params<T> &p) {
  if (shared > kDefaultShared) {
    const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared));
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // not left for the next launch's check
      return gemv_status(e);
    }
  }
  kernel<<<grid, block, shared, stream>>>(p);
  return gemv_status(cudaGetLastError());
}

// How a launch is shaped: the 16-row slices of a block (each of its warps carries them all), and
// the resident warps an SM is sized for.
struct Shape {
  int slices;
  int resident_warps;
};

template <class T, bool kZeros, int kSlices>
int launch_slices(const Params<T> &p, int64_t sms, int resident_warps, int device, cudaStream_t stream) {
  // Warps per block: as many as keep all blocks resident at once at resident_warps an SM (one
  // wave), between 1 and 16, never more than the chunks of k to share, within the device's shared
  // memory.
  const int blocks = p.n / 16 / kSlices, chunks = p.k / kChunk;
  const int token_groups = (p.m + 7) / 8;
  const size_t per_warp = size_t(kStages) * (token_groups == 1   ? Slot<kSlices, 1>::kBytes
                                               : token_groups == 2 ? Slot<kSlices, 2>::kBytes
                                               : token_groups == 3 ? Slot<kSlices, 3>::kBytes
                                                                   : Slot<kSlices, 4>::kBytes);
  int64_t warps = sms * resident_warps / blocks;
  if (warps > kMaxWarps) warps = kMaxWarps;
  if (warps > chunks) warps = chunks;
  if (warps > int64_t(max_shared(device) / per_warp)) warps = max_shared(device) / per_warp;
  if (warps < 1) warps = 1;
  const size_t shared = per_warp * warps;
  const dim3 grid(blocks), block(static_cast<unsigned>(warps) * 32);
  // Four slices take at most two token groups (choose_shape sees to it): more accumulators spill.
  switch (token_groups) {
    case 1:
      return start(gemv_kernel<T, kZeros, kSlices, 1>, grid, block, shared, stream, p);
    case 2:
      return start(gemv_kernel<T, kZeros, kSlices, 2>, grid, block, shared, stream, p);
    case 3:
      if constexpr (kSlices <= 2) return start(gemv_kernel<T, kZeros, kSlices, 3>, grid, block, shared, stream, p);
      return CUTLASS_RS_ERROR_INVALID;
    default:
      if constexpr (kSlices <= 2) return start(gemv_kernel<T, kZeros, kSlices, 4>, grid, block, shared, stream, p);
      return CUTLASS_RS_ERROR_INVALID;
  }
}

// The shape a problem gets, fitted on an H200 to the layers of Llama-3-8B and -70B, Llama-2-7B and
// Qwen2.5-7B at 1 and 16 tokens: two slices a block while that leaves at most one block per SM
// (a second block on a few SMs doubles their share: 4608 rows ran 1.4x slower in two slices a
// block than in four at 16 tokens), four beyond (fewer instructions per byte); one where the
// weight's slices are odd. Three or four token groups take two slices (more accumulators spill).
Shape choose_shape(int64_t m, int64_t n, int64_t sms) {
  const int64_t slices = n / 16;
  const int64_t token_groups = (m + 7) / 8;
  Shape shape;
  if (token_groups > 2) {
    shape = Shape{2, 32};
  } else if (slices <= 2 * sms) {
    shape = Shape{2, 24};
  } else {
    shape = Shape{4, token_groups == 1 ? 24 : 16};
  }
  while (slices % shape.slices != 0) shape.slices /= 2;
  return shape;
}

// The kernels' arguments from the C ones (the 4-bit layout's strides aside).
template <class T>
Params<T> params(const cutlass_rs_weight_only_args &a) {
  Params<T> p;
  p.m = static_cast<int>(a.m);
  p.n = static_cast<int>(a.n);
  p.k = static_cast<int>(a.k);
  p.group_size = static_cast<int>(a.group_size);
  p.x = static_cast<const T *>(a.x);
  p.ldx = a.ldx;
  p.w = static_cast<const uint32_t *>(a.w);
  p.block_col_words = 0;
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
  p.chunks_per_group_inv = static_cast<double>(kChunk) / static_cast<double>(p.group_size);
  return p;
}

template <class T, bool kZeros>
int launch(const cutlass_rs_weight_only_args &a, cudaStream_t stream, Shape shape) {
  Params<T> p = params<T>(a);
  // The packed layout's offsets (in values) of the blocks next to the first, as words; the
  // kernels' layout must tile its 16 x 16 blocks as whole, lane-ordered 128-byte runs.
  const auto layout = cutlass_rs::weight::packed_layout<cutlass::bfloat16_t>(p.n, p.k);
  const int64_t origin = layout(0, 0, 0);
  p.block_col_words = (int64_t(layout(0, 16, 0)) - origin) / 8;
  // The kernel reads a block's slices as consecutive 128-byte runs.
  if ((int64_t(layout(16, 0, 0)) - origin) / 8 != 32) return CUTLASS_RS_ERROR_INVALID;
  const int64_t sms = a.sm_count > 0 ? a.sm_count : 1;
  switch (shape.slices) {
    case 1:
      return launch_slices<T, kZeros, 1>(p, sms, shape.resident_warps, a.device_id, stream);
    case 2:
      return launch_slices<T, kZeros, 2>(p, sms, shape.resident_warps, a.device_id, stream);
    default:
      return launch_slices<T, kZeros, 4>(p, sms, shape.resident_warps, a.device_id, stream);
  }
}

// Launches the FP8 GEMV for kTokenGroups groups of 8 tokens, shaped for them: its slices a block,
// chunks a run, whether it pipelines (see gemv_fp8_kernel) and its warps a block. Fitted on an
// H200 to the layers of Llama-3-8B and -70B at 1 to 32 tokens (docs/performance.md): up to 8
// tokens, one slice and runs of two chunks, as many warps as make 32 an SM over the grid; 9 to 24,
// two slices and runs of two, 16 warps an SM, and a count of warps that divides the runs (a warp
// with one run more than the others kept the block waiting: 0.98x cuBLAS against 1.23x on the 8B
// qkv layer at 16 tokens); 25 to 32, two slices, runs of one chunk, the next one's weight loaded
// while one is multiplied, 32 warps an SM.
template <class T, Byte kByte, int kTokenGroups, int kSlices = (kTokenGroups == 1 ? 1 : 2)>
int launch_fp8_groups(const Params<T> &p, int64_t sms, int device, cudaStream_t stream) {
  // One slice a block where the weight's slices are odd.
  if constexpr (kSlices > 1) {
    if ((p.n / 16) % kSlices != 0) return launch_fp8_groups<T, kByte, kTokenGroups, 1>(p, sms, device, stream);
  }
  constexpr int kUnroll = kTokenGroups == 4 ? 1 : 2;
  constexpr bool kPipe = kTokenGroups == 4, kBalanced = kTokenGroups == 2 || kTokenGroups == 3;
  // Warps an SM the grid is sized for.
  constexpr int kResidentWarps = kBalanced ? 16 : 32;
  const int64_t blocks = p.n / 16 / kSlices, chunks = p.k / kChunk;
  // The partial sums' shared memory a warp.
  const size_t per_warp = size_t(kSlices) * kTokenGroups * 4 * 32 * sizeof(float);
  // Warps a block: between 1 and 16, at most the runs of k, within the shared memory; with
  // kBalanced the largest divisor of the runs below that, unless it is less than half of it (the
  // 148 runs of Qwen2.5-7B's down layer would have taken 4 warps rather than 16, and ran 0.81x
  // cuBLAS so; 1.60x with 16).
  const int64_t runs = (chunks + kUnroll - 1) / kUnroll;
  int64_t warps = sms * kResidentWarps / blocks;
  if (warps > kMaxWarps) warps = kMaxWarps;
  if (warps > runs) warps = runs;
  while (warps > 1 && size_t(warps) * per_warp > max_shared(device)) --warps;
  if (warps < 1) warps = 1;
  if (kBalanced) {
    int64_t divisor = warps;
    while (runs % divisor != 0) --divisor;
    if (2 * divisor >= warps) warps = divisor;
  }
  return start(gemv_fp8_kernel<T, kByte, kSlices, kTokenGroups, kUnroll, kPipe>, dim3(static_cast<unsigned>(blocks)),
               dim3(static_cast<unsigned>(warps) * 32), warps * per_warp, stream, p);
}

template <class T, Byte kByte>
int launch_fp8(const cutlass_rs_weight_only_args &a, int64_t sms, cudaStream_t stream) {
  const Params<T> p = params<T>(a);
  switch ((p.m + 7) / 8) {
    case 1:
      return launch_fp8_groups<T, kByte, 1>(p, sms, a.device_id, stream);
    case 2:
      return launch_fp8_groups<T, kByte, 2>(p, sms, a.device_id, stream);
    case 3:
      return launch_fp8_groups<T, kByte, 3>(p, sms, a.device_id, stream);
    default:
      return launch_fp8_groups<T, kByte, 4>(p, sms, a.device_id, stream);
  }
}

// The rules of cutlass_rs_weight_gemv's arguments.
int check(const cutlass_rs_weight_only_args *a, int32_t dtype, int32_t weight) {
  if (a == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (dtype != CUTLASS_RS_DTYPE_BF16 && dtype != CUTLASS_RS_DTYPE_F16) return CUTLASS_RS_ERROR_INVALID_DATA_TYPE;
  if (weight != CUTLASS_RS_WEIGHT_GEMV_S4 && weight != CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS &&
      weight != CUTLASS_RS_WEIGHT_GEMV_E4M3 && weight != CUTLASS_RS_WEIGHT_GEMV_S8)
    return CUTLASS_RS_ERROR_INVALID;
  // fp8: the per-channel formats (e4m3 and s8), one byte a value and one group.
  const bool zeros = weight == CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS,
             fp8 = weight == CUTLASS_RS_WEIGHT_GEMV_E4M3 || weight == CUTLASS_RS_WEIGHT_GEMV_S8;
  if (a->x == nullptr || a->w == nullptr || a->scales == nullptr || a->d == nullptr || (zeros && a->zeros == nullptr) ||
      (a->beta != 0.f && a->c == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (!zeros && a->zeros != nullptr) return CUTLASS_RS_ERROR_INVALID;
  // n * k below 2^31: the packed layout's index (and its strides, computed on the host) are int.
  if (a->m < 1 || a->m > CUTLASS_RS_WEIGHT_GEMV_MAX_TOKENS || a->n < 16 || a->n % 16 != 0 || a->k < 64 ||
      a->k % 64 != 0 || a->n > INT32_MAX || a->k > INT32_MAX || a->n * a->k > INT32_MAX || a->group_size < 64 ||
      a->group_size % 64 != 0 || a->k % a->group_size != 0 || (fp8 && a->group_size != a->k) || a->ldx < a->k ||
      a->ldd < a->n || (a->c != nullptr && a->ldc < a->n))
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (a->activation < CUTLASS_RS_ACTIVATION_IDENTITY || a->activation > CUTLASS_RS_ACTIVATION_SILU)
    return CUTLASS_RS_ERROR_INVALID;
  // X and W are read 16 bytes at a time, and the 4-bit weight's scales and zeros copied so (the
  // FP8 weight's scales are read one by one).
  if (!aligned(a->x, 16) || a->ldx % 8 != 0 || !aligned(a->w, 16) || !aligned(a->scales, fp8 ? 2 : 16) ||
      (a->zeros != nullptr && !aligned(a->zeros, 16)))
    return CUTLASS_RS_ERROR_MISALIGNED_OPERAND;
  return CUTLASS_RS_OK;
}

template <class T>
int run_typed(const cutlass_rs_weight_only_args &a, int32_t weight, cudaStream_t stream) {
  const int64_t sms = a.sm_count > 0 ? a.sm_count : 1;
  switch (weight) {
    case CUTLASS_RS_WEIGHT_GEMV_E4M3:
      return launch_fp8<T, Byte::kE4m3>(a, sms, stream);
    case CUTLASS_RS_WEIGHT_GEMV_S8:
      return launch_fp8<T, Byte::kS8>(a, sms, stream);
    case CUTLASS_RS_WEIGHT_GEMV_U4_ZEROS:
      return launch<T, true>(a, stream, choose_shape(a.m, a.n, sms));
    default:
      return launch<T, false>(a, stream, choose_shape(a.m, a.n, sms));
  }
}

int run_checked(const cutlass_rs_weight_only_args *args, int32_t dtype, int32_t weight, void *stream) {
  int current = -1;
  const cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  if (current != args->device_id) return CUTLASS_RS_ERROR_WRONG_DEVICE;
  auto s = static_cast<cudaStream_t>(stream);
  return dtype == CUTLASS_RS_DTYPE_BF16 ? run_typed<__nv_bfloat16>(*args, weight, s) : run_typed<__half>(*args, weight, s);
}

}  // namespace

extern "C" int cutlass_rs_weight_gemv(const cutlass_rs_weight_only_args *args, int32_t dtype, int32_t weight,
                                      int32_t launch_it, void *stream) {
  const int status = check(args, dtype, weight);
  if (status != CUTLASS_RS_OK || !launch_it) return status;
  return run_checked(args, dtype, weight, stream);
}
