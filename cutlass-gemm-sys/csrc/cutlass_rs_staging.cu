// Staging copies for GEMM operands that the TMA kernels cannot address in place. Hand-written, not
// generated; compiled by cutlass-gemm-sys's build script (same nvcc, flags and object cache as the
// GEMM kernels) for every selected architecture.
//
// TMA reads and writes global memory through descriptors whose strides must be multiples of 16
// bytes, and CUTLASS's kernels also want the contiguous extent of each operand to be a multiple of
// their alignment. A GEMM with, say, k = 4095 in bf16, a vocabulary of n = 50257, or m = 257 for
// blockwise scales breaks those rules. The safe crate then copies the operands that break them into
// a padded, aligned buffer in its workspace (zeros in the padding, which adds nothing to a dot
// product), runs the kernel there and copies D back. These are those copies.
//
// A matrix here is `batch` slices of `outer` lines of `inner` contiguous elements: line o of slice
// b starts at element b * batch_stride + o * ld. Elements are copied as raw bits (1, 2 or 4 bytes).

#include <cstdint>

#include <cuda_runtime_api.h>

#include "cutlass_rs_abi.h"

namespace {

constexpr int kThreads = 256;

// dst[b, o, i] = src[b, o, i] for o < outer and i < inner, 0 elsewhere in dst's
// dst_outer x dst_inner lines. x strides over a line's elements, y over the lines of all slices.
template <class T>
__device__ void copy_lines(const T *__restrict__ src, int64_t src_ld, int64_t src_batch_stride,
                           T *__restrict__ dst, int64_t dst_ld, int64_t dst_batch_stride, int64_t inner,
                           int64_t outer, int64_t dst_inner, int64_t dst_outer, int64_t batch) {
  const int64_t lines = dst_outer * batch;
  for (int64_t line = blockIdx.y; line < lines; line += gridDim.y) {
    const int64_t b = line / dst_outer;
    const int64_t o = line - b * dst_outer;
    const T *s = src + b * src_batch_stride + o * src_ld;
    T *d = dst + b * dst_batch_stride + o * dst_ld;
    const bool inside = o < outer;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < dst_inner;
         i += int64_t(gridDim.x) * blockDim.x) {
      d[i] = (inside && i < inner) ? s[i] : T(0);
    }
  }
}

// An operand into its padded copy (zeros in the padding).
template <class T>
__global__ void copy_matrix_kernel(const T *__restrict__ src, int64_t src_ld, int64_t src_batch_stride,
                                   T *__restrict__ dst, int64_t dst_ld, int64_t dst_batch_stride,
                                   int64_t inner, int64_t outer, int64_t dst_inner, int64_t dst_outer,
                                   int64_t batch) {
  copy_lines(src, src_ld, src_batch_stride, dst, dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer,
             batch);
}

// A kernel's padded D back into the caller's D (the common part only). A kernel of its own, so that
// profilers and compute-sanitizer name it: it reads what a GEMM's epilogue wrote, by TMA stores that
// initcheck does not record as writes.
template <class T>
__global__ void copy_back_kernel(const T *__restrict__ src, int64_t src_ld, int64_t src_batch_stride,
                                 T *__restrict__ dst, int64_t dst_ld, int64_t dst_batch_stride, int64_t inner,
                                 int64_t outer, int64_t dst_inner, int64_t dst_outer, int64_t batch) {
  copy_lines(src, src_ld, src_batch_stride, dst, dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer,
             batch);
}

template <class T>
using Kernel = void (*)(const T *, int64_t, int64_t, T *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                        int64_t);

int status_of(cudaError_t e) { return e == cudaSuccess ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_CUDA_BASE + int(e); }

template <class T>
int launch(Kernel<T> kernel, const void *src, int64_t src_ld, int64_t src_batch_stride, void *dst, int64_t dst_ld,
           int64_t dst_batch_stride, int64_t inner, int64_t outer, int64_t dst_inner, int64_t dst_outer,
           int64_t batch, cudaStream_t stream) {
  const int64_t blocks_per_line = (dst_inner + kThreads - 1) / kThreads;
  const int64_t lines = dst_outer * batch;
  const dim3 grid(unsigned(blocks_per_line < 64 ? blocks_per_line : 64), unsigned(lines < 65535 ? lines : 65535), 1);
  kernel<<<grid, kThreads, 0, stream>>>(static_cast<const T *>(src), src_ld, src_batch_stride, static_cast<T *>(dst),
                                        dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer, batch);
  return status_of(cudaGetLastError());
}

// Checks the geometry and launches the copy for the element size; `back` picks the copy-back kernel.
int copy(bool back, const void *src, int64_t src_ld, int64_t src_batch_stride, void *dst, int64_t dst_ld,
         int64_t dst_batch_stride, int64_t element_bytes, int64_t inner, int64_t outer, int64_t dst_inner,
         int64_t dst_outer, int64_t batch, void *stream) {
  if (src == nullptr || dst == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (inner < 0 || outer < 0 || batch < 1 || dst_inner < inner || dst_outer < outer || dst_ld < dst_inner ||
      src_ld < inner || src_batch_stride < 0 || dst_batch_stride < 0)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (dst_inner == 0 || dst_outer == 0) return CUTLASS_RS_OK;
  auto s = static_cast<cudaStream_t>(stream);
  switch (element_bytes) {
    case 1:
      return launch<uint8_t>(back ? copy_back_kernel<uint8_t> : copy_matrix_kernel<uint8_t>, src, src_ld,
                             src_batch_stride, dst, dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer,
                             batch, s);
    case 2:
      return launch<uint16_t>(back ? copy_back_kernel<uint16_t> : copy_matrix_kernel<uint16_t>, src, src_ld,
                              src_batch_stride, dst, dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer,
                              batch, s);
    case 4:
      return launch<uint32_t>(back ? copy_back_kernel<uint32_t> : copy_matrix_kernel<uint32_t>, src, src_ld,
                              src_batch_stride, dst, dst_ld, dst_batch_stride, inner, outer, dst_inner, dst_outer,
                              batch, s);
    default:
      return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  }
}

}  // namespace

extern "C" int cutlass_rs_copy_matrix(const void *src, int64_t src_ld, int64_t src_batch_stride, void *dst,
                                      int64_t dst_ld, int64_t dst_batch_stride, int64_t element_bytes,
                                      int64_t inner, int64_t outer, int64_t dst_inner, int64_t dst_outer,
                                      int64_t batch, void *stream) {
  return copy(false, src, src_ld, src_batch_stride, dst, dst_ld, dst_batch_stride, element_bytes, inner, outer,
              dst_inner, dst_outer, batch, stream);
}

extern "C" int cutlass_rs_copy_back(const void *src, int64_t src_ld, int64_t src_batch_stride, void *dst,
                                    int64_t dst_ld, int64_t dst_batch_stride, int64_t element_bytes, int64_t inner,
                                    int64_t outer, int64_t batch, void *stream) {
  return copy(true, src, src_ld, src_batch_stride, dst, dst_ld, dst_batch_stride, element_bytes, inner, outer,
              inner, outer, batch, stream);
}
