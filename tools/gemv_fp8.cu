// The FP8 decode GEMV (cutlass_rs_weight_gemv with CUTLASS_RS_WEIGHT_GEMV_E4M3) on the layers of
// Llama-3-8B and -70B at 1 to 32 tokens against cuBLAS's bf16 GEMM on the dequantized weight, in
// one process, kernel against kernel (40 launches, weights rotated over 300 MB so that they come
// from memory), and on those layers and three small ones (an odd count of 16-row slices among
// them) every result against an f64 reference over the exact e4m3 values, within a bound of one
// unit of the output's type plus 2 k units of f32 over sum |w x s|. The weights are random e4m3
// bytes (NaN excluded), X uniform in [-1, 1]. For the GPU machine (cuBLAS is loaded at run time):
//
//   TC=third_party/toolchain; CU=$TC/cutlass_library/source
//   $TC/nvidia/cu13/bin/nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
//     -gencode=arch=compute_90a,code=sm_90a -I $CU/include -I cutlass-gemm-sys/csrc \
//     tools/gemv_fp8.cu -o gemv_fp8 -ldl -cudart static -L$TC/nvidia/cu13/lib
//   ./gemv_fp8          # bf16 timed, bf16 and f16 checked; `./gemv_fp8 f16` times f16 too
#include "cutlass_rs_weight_gemv.cu"

#include <cuda_fp8.h>
#include <dlfcn.h>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cmath>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA error %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1);} } while (0)

__device__ inline uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return static_cast<uint32_t>(x);
}
__global__ void fill_fp8(uint8_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint8_t b = hash32(seed * 0x9E3779B97F4A7C15ULL + i) & 0xFF;
    if ((b & 0x7F) == 0x7F) b = 0x7E;  // no NaN
    p[i] = b;
  }
}
template <class T>
__global__ void fill_vals(T *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float u = (hash32(seed * 0x9E3779B97F4A7C15ULL + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = T(2.0f * u - 1.0f);
  }
}
template <class T>
__global__ void dequant(const uint8_t *q, const T *s, T *w, int64_t n, int64_t k) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < size_t(n * k); i += size_t(gridDim.x) * blockDim.x) {
    __nv_fp8_e4m3 v; v.__x = q[i];
    w[i] = T(float(v) * float(s[i / k]));
  }
}
template <class T>
__global__ void reference(int m, int n, int k, const T *x, const uint8_t *q, const T *s, double *out, double *mag) {
  int row = blockIdx.x * blockDim.x + threadIdx.x, token = blockIdx.y;
  if (row >= n) return;
  double acc = 0, mg = 0;
  for (int i = 0; i < k; ++i) {
    __nv_fp8_e4m3 v; v.__x = q[int64_t(row) * k + i];
    double a = double(float(v)) * double(float(x[int64_t(token) * k + i]));
    acc += a; mg += fabs(a);
  }
  out[token * n + row] = acc * double(float(s[row]));
  mag[token * n + row] = mg * fabs(double(float(s[row])));
}

typedef int (*create_t)(void **);
typedef int (*setstream_t)(void *, cudaStream_t);
typedef int (*gemmex_t)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int,
                        const void *, void *, int, int, int, int);
create_t cublas_create; setstream_t cublas_set_stream; gemmex_t cublas_gemm;


template <class T>
int run_type(void *handle, cudaStream_t st, int sms, int dtype, int cublas_type, const char *tname, bool timing) {
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  struct S { const char *name; int n, k; } shapes[] = {
    {"8b-qkv", 6144, 4096}, {"8b-o", 4096, 4096}, {"8b-gate_up", 28672, 4096}, {"8b-down", 4096, 14336},
    {"70b-qkv", 10240, 8192}, {"70b-o", 8192, 8192}, {"70b-gate_up", 57344, 8192}, {"70b-down", 8192, 28672},
    {"odd-slices", 16 * 37, 192}, {"tiny", 16, 64}, {"odd2", 16 * 133, 64 * 7}};
  int worst_fail = 0;
  for (auto &sh : shapes) {
    const int64_t n = sh.n, k = sh.k;
    const size_t wbytes = n * k;
    const bool big = wbytes >= (1 << 20);
    const int copies = big ? std::max<size_t>(2, (300ull << 20) / wbytes + 1) : 1;
    const int bcopies = big ? std::max<size_t>(2, (300ull << 20) / (2 * wbytes) + 1) : 1;
    std::vector<uint8_t *> wq(copies); std::vector<T *> wb(bcopies);
    T *scales; CK(cudaMalloc(&scales, n * 2));
    fill_vals<<<256, 256>>>(scales, n, 77);
    for (int c = 0; c < copies; ++c) { CK(cudaMalloc(&wq[c], wbytes)); fill_fp8<<<1024, 256>>>(wq[c], wbytes, 1); }
    for (int c = 0; c < bcopies; ++c) { CK(cudaMalloc(&wb[c], wbytes * 2)); dequant<<<1024, 256>>>(wq[0], scales, wb[c], n, k); }
    T *x, *y; CK(cudaMalloc(&x, 32 * k * 2)); CK(cudaMalloc(&y, 32 * n * 2));
    fill_vals<<<256, 256>>>(x, 32 * k, 5);
    double *ref, *mag; CK(cudaMalloc(&ref, 32 * n * 8)); CK(cudaMalloc(&mag, 32 * n * 8));
    CK(cudaDeviceSynchronize());
    const int ms_timed[] = {1, 4, 8, 12, 16, 20, 24, 32};
    const int ms_check[] = {1, 2, 3, 5, 7, 8, 9, 13, 16, 17, 23, 24, 25, 31, 32};
    for (int m : (timing && big ? std::vector<int>(ms_timed, ms_timed + 8) : std::vector<int>(ms_check, ms_check + 15))) {
      cutlass_rs_weight_only_args a{};
      a.m = m; a.n = n; a.k = k; a.group_size = k; a.x = x; a.ldx = k; a.w = wq[0]; a.scales = scales;
      a.d = y; a.ldd = n; a.alpha = 1.f; a.beta = 0.f; a.device_id = 0; a.sm_count = sms;
      CK(cudaMemset(y, 0xFF, 32 * n * 2));
      int status = cutlass_rs_weight_gemv(&a, dtype, CUTLASS_RS_WEIGHT_GEMV_E4M3, 1, st);
      if (status) { printf("status %d\n", status); return 1; }
      reference<<<dim3((n + 127) / 128, m), 128, 0, st>>>(m, n, k, x, wq[0], scales, ref, mag);
      CK(cudaStreamSynchronize(st));
      std::vector<T> hy(m * n); std::vector<double> hr(m * n), hm(m * n);
      CK(cudaMemcpy(hy.data(), y, m * n * 2, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hr.data(), ref, m * n * 8, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hm.data(), mag, m * n * 8, cudaMemcpyDeviceToHost));
      // Bound: the output's rounding (half a unit of T) plus 2 k units of f32 over sum |w x s|.
      const double unit = dtype == CUTLASS_RS_DTYPE_BF16 ? 1.0 / 256 : 1.0 / 2048;
      double worst = 0;
      for (int i = 0; i < m * n; ++i) {
        double err = fabs(double(float(hy[i])) - hr[i]);
        double bound = fabs(hr[i]) * unit * 1.0001 + hm[i] * 2.0 * k * 5.96e-8 + 1e-30;
        worst = std::max(worst, err / bound);
      }
      if (worst > 1) worst_fail = 1;
      if (!(timing && big)) { printf("%s %s m=%d err/bound %.3f\n", tname, sh.name, m, worst); continue; }
      auto time = [&](auto fn, int reps) {
        for (int i = 0; i < 3; ++i) fn(i);
        CK(cudaEventRecord(e0, st));
        for (int i = 0; i < reps; ++i) fn(i);
        CK(cudaEventRecord(e1, st));
        CK(cudaEventSynchronize(e1));
        float ms_; CK(cudaEventElapsedTime(&ms_, e0, e1));
        return ms_ * 1e3 / reps;
      };
      const int reps = 40;
      float one = 1.f, zero = 0.f;
      double tb = time([&](int i) {
        cublas_gemm(handle, 1, 0, n, m, k, &one, wb[i % bcopies], cublas_type, k, x, cublas_type, k, &zero, y, cublas_type, n, 68, -1);
      }, reps);
      double td = time([&](int i) {
        a.w = wq[i % copies];
        cutlass_rs_weight_gemv(&a, dtype, CUTLASS_RS_WEIGHT_GEMV_E4M3, 1, st);
      }, reps);
      const double bytes = double(wbytes) + 2.0 * m * k + 2.0 * m * n + 2.0 * n;
      printf("%s %s m=%d cublas %.2f us  gemv %.2f us  %.3fx  %.0f GB/s  err/bound %.3f\n", tname, sh.name, m, tb, td, tb / td,
             bytes / td * 1e-3, worst);
      fflush(stdout);
    }
    for (auto p : wq) cudaFree(p);
    for (auto p : wb) cudaFree(p);
    cudaFree(scales); cudaFree(x); cudaFree(y); cudaFree(ref); cudaFree(mag);
  }
  return worst_fail;
}

int main(int argc, char **argv) {
  void *lib = dlopen("libcublas.so.13", RTLD_NOW);
  if (!lib) lib = dlopen("libcublas.so", RTLD_NOW);
  if (!lib) { printf("no cublas: %s\n", dlerror()); return 1; }
  cublas_create = (create_t)dlsym(lib, "cublasCreate_v2");
  cublas_set_stream = (setstream_t)dlsym(lib, "cublasSetStream_v2");
  cublas_gemm = (gemmex_t)dlsym(lib, "cublasGemmEx");
  void *handle; if (cublas_create(&handle)) { printf("cublasCreate failed\n"); return 1; }
  cudaStream_t st; CK(cudaStreamCreate(&st)); cublas_set_stream(handle, st);
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s sms=%d\n", prop.name, sms);
  int fail = run_type<__nv_bfloat16>(handle, st, sms, CUTLASS_RS_DTYPE_BF16, 14, "bf16", true);
  fail |= run_type<__nv_bfloat16>(handle, st, sms, CUTLASS_RS_DTYPE_BF16, 14, "bf16", false);
  fail |= run_type<__half>(handle, st, sms, CUTLASS_RS_DTYPE_F16, 2, "f16", false);
  if (argc > 1) fail |= run_type<__half>(handle, st, sms, CUTLASS_RS_DTYPE_F16, 2, "f16", true);
  printf(fail ? "FAIL\n" : "ALL WITHIN BOUND\n");
  return fail;
}
