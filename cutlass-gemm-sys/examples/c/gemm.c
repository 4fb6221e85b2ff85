/*
 * The C ABI of cutlass-gemm-sys from C: list the kernels of the build, show a typed refusal, and, where
 * a CUDA GPU is present, run a bf16 GEMM (D = A.B, A row-major m x k, B column-major k x n, D
 * row-major) with the build's 128x256x64 cooperative kernel and check it against a host product.
 * Inputs are small integers, exact in bf16, so the check is exact.
 *
 * Build (paths from cutlass_gemm_sys::{INCLUDE_DIR, LIB_DIR, CUDA_INCLUDE_DIR, CUDA_LIB_DIR};
 * tests/c_abi.rs does this):
 *   cc examples/c/gemm.c -I$INCLUDE_DIR -I$CUDA_INCLUDE_DIR $LIB_DIR/libcutlass_rs_kernels.a \
 *      -L$CUDA_LIB_DIR -lcudart_static -lstdc++ -ldl -lrt -lpthread -o gemm_c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cutlass_rs.h"

static uint16_t bf16_from_small_int(int v) {
  float f = (float)v;
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)(bits >> 16); /* exact for small integers */
}

static float bf16_to_float(uint16_t b) {
  uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

int main(void) {
  int64_t count = cutlass_rs_kernel_count();
  printf("kernels: %lld\n", (long long)count);
  const cutlass_rs_kernel_entry *gemm = NULL;
  for (int64_t i = 0; i < count; ++i) {
    const cutlass_rs_kernel_entry *k = cutlass_rs_kernel_get(i);
    if (strstr(k->name, "_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnt_align8_warpspecialized_cooperative_epi_tma") &&
        !strstr(k->name, "stream_k"))
      gemm = k;
  }
  if (gemm == NULL) {
    printf("the bf16 128x256x64 TN kernel is not in this build\n");
    return 1;
  }
  printf("kernel: %s\n", gemm->name);

  /* A typed refusal, no GPU needed: null operands. */
  cutlass_rs_gemm_args args;
  memset(&args, 0, sizeof args);
  args.m = args.n = args.k = 256;
  args.batch = 1;
  printf("null operands: status %d (CUTLASS_RS_ERROR_NULL_ARGUMENT = %d)\n", gemm->can_implement(&args),
         CUTLASS_RS_ERROR_NULL_ARGUMENT);
  if (gemm->can_implement(&args) != CUTLASS_RS_ERROR_NULL_ARGUMENT) return 1;

  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("no CUDA device: skipping the launch\n");
    return 0;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  if (prop.major != 9) {
    printf("device is sm_%d%d, the kernel is sm_90a: skipping the launch\n", prop.major, prop.minor);
    return 0;
  }
  const int64_t m = 200, n = 264, k = 136; /* not tile multiples */
  uint16_t *a = malloc(sizeof(uint16_t) * m * k), *b = malloc(sizeof(uint16_t) * k * n);
  uint16_t *d = malloc(sizeof(uint16_t) * m * n);
  for (int64_t i = 0; i < m * k; ++i) a[i] = bf16_from_small_int((int)(i % 7) - 3);
  for (int64_t i = 0; i < k * n; ++i) b[i] = bf16_from_small_int((int)(i % 5) - 2);
  void *da, *db, *dd;
  cudaMalloc(&da, sizeof(uint16_t) * m * k);
  cudaMalloc(&db, sizeof(uint16_t) * k * n);
  cudaMalloc(&dd, sizeof(uint16_t) * m * n);
  cudaMemcpy(da, a, sizeof(uint16_t) * m * k, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, sizeof(uint16_t) * k * n, cudaMemcpyHostToDevice);
  args.m = m;
  args.n = n;
  args.k = k;
  args.a = da;
  args.lda = k; /* row-major m x k */
  args.batch_stride_a = m * k;
  args.b = db;
  args.ldb = k; /* column-major k x n */
  args.batch_stride_b = k * n;
  args.c = dd;
  args.ldc = n;
  args.batch_stride_c = m * n;
  args.d = dd;
  args.ldd = n; /* row-major m x n */
  args.batch_stride_d = m * n;
  args.alpha = 1.0f;
  args.beta = 0.0f;
  args.device_id = 0;
  args.sm_count = prop.multiProcessorCount;
  size_t ws_bytes = 0;
  int status = gemm->workspace_size(&args, &ws_bytes);
  void *ws = NULL;
  if (ws_bytes) cudaMalloc(&ws, ws_bytes);
  if (status == CUTLASS_RS_OK) status = gemm->run(&args, ws, ws_bytes, NULL);
  cudaDeviceSynchronize();
  printf("run: status %d\n", status);
  if (status != CUTLASS_RS_OK) return 1;
  cudaMemcpy(d, dd, sizeof(uint16_t) * m * n, cudaMemcpyDeviceToHost);
  int64_t wrong = 0;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float ref = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) ref += bf16_to_float(a[i * k + kk]) * bf16_to_float(b[j * k + kk]);
      /* |ref| <= 136 * 3 * 2 = 816: the f32 sum is exact; D is its bf16 rounding (to nearest even). */
      uint32_t rb;
      memcpy(&rb, &ref, sizeof rb);
      uint32_t r = rb + 0x7fff + ((rb >> 16) & 1); /* round to nearest even */
      if (d[i * n + j] != (uint16_t)(r >> 16)) ++wrong;
    }
  printf("%lld x %lld x %lld bf16 GEMM from C: %lld of %lld elements differ from the host\n", (long long)m,
         (long long)n, (long long)k, (long long)wrong, (long long)(m * n));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  if (ws) cudaFree(ws);
  free(a);
  free(b);
  free(d);
  return wrong == 0 ? 0 : 1;
}
