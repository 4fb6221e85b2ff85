// The weight-only decode GEMV in each of its launch shapes beside the library's choice, on the
// layers its shape rule was fitted to, at the tokens given: time (median of 5 rounds of 20
// launches, weights rotated over three times the L2) and each result's largest error against an
// f32 reference over the exact dequantized values, relative to sum |x w|. For the GPU machine:
//
//   TC=third_party/toolchain; CU=$TC/cutlass_library/source
//   $TC/nvidia/cu13/bin/nvcc -std=c++17 -O3 -DNDEBUG --expt-relaxed-constexpr \
//     -gencode=arch=compute_90a,code=sm_90a -I $CU/include -I cutlass-gemm-sys/csrc \
//     tools/gemv_shapes.cu -o gemv_shapes -cudart static -L$TC/nvidia/cu13/lib
//   ./gemv_shapes 1,16            # tokens; docs/perf/weight-only-gemv-shapes-h200.txt
//
// A shape is "slices/resident warps" (choose_shape in the kernel's source); "auto" is the library's
// choice. bf16 activations, groups of 128, scales only (zp 0) and with zeros (zp 1).
#include "cutlass_rs_weight_gemv.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace {

__device__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void fill_words(uint32_t *p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x)
    p[i] = hash32(seed * 0x9E3779B97F4A7C15ULL + i);
}

__global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float u = (hash32(seed * 0x9E3779B97F4A7C15ULL + i) >> 8) * (1.0f / 16777216.0f);
    p[i] = __float2bfloat16_rn(lo + (hi - lo) * u);
  }
}

// One thread per (token, row): sum over k of x . (q . s + z) in f64, and sum |x . (q . s + z)|.
__global__ void reference(int m, int n, int k, int g, const __nv_bfloat16 *x, const uint8_t *w,
                          const __nv_bfloat16 *s, const __nv_bfloat16 *z, bool zeros, float *out, float *mag) {
  const int row = blockIdx.x * blockDim.x + threadIdx.x, token = blockIdx.y;
  if (row >= n || token >= m) return;
  const auto layout = cutlass_rs::weight::packed_layout<cutlass::bfloat16_t>(n, k);
  double acc = 0, sum = 0;
  for (int i = 0; i < k; ++i) {
    const int64_t at = layout(row, i, 0);
    const int nibble = (w[at / 2] >> ((at % 2) * 4)) & 0xF;
    const int q = zeros ? nibble : (nibble >= 8 ? nibble - 16 : nibble);
    const int64_t gi = int64_t(i / g) * n + row;
    const double v = q * double(__bfloat162float(s[gi])) + (zeros ? double(__bfloat162float(z[gi])) : 0.0);
    const double xv = __bfloat162float(x[int64_t(token) * k + i]);
    acc += xv * v;
    sum += std::fabs(xv * v);
  }
  out[int64_t(token) * n + row] = float(acc);
  mag[int64_t(token) * n + row] = float(sum);
}

struct Layer {
  const char *name;
  int n, k;
};

struct Variant {
  const char *name;
  int slices, resident;  // slices 0: the library's choice
};

}  // namespace

int main(int argc, char **argv) {
  std::vector<int> tokens = {1, 16};
  if (argc > 1) {
    tokens.clear();
    for (char *t = std::strtok(argv[1], ","); t; t = std::strtok(nullptr, ",")) tokens.push_back(std::atoi(t));
  }
  CHECK_CUDA(cudaSetDevice(0));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  // The fit families' layers: Llama-3-8B and -70B, Llama-2-7B, Qwen2.5-7B.
  const std::vector<Layer> layers = {
      {"8B.qkv", 6144, 4096},   {"8B.o", 4096, 4096},       {"8B.gate_up", 28672, 4096}, {"8B.down", 4096, 14336},
      {"70B.qkv", 10240, 8192}, {"70B.o", 8192, 8192},      {"70B.gate_up", 57344, 8192}, {"70B.down", 8192, 28672},
      {"l2.qkv", 12288, 4096},  {"l2.gateup", 22016, 4096}, {"l2.down", 4096, 11008},    {"l2.lmhead", 32000, 4096},
      {"q7.qkv", 4608, 3584},   {"q7.o", 3584, 3584},       {"q7.down", 3584, 18944},    {"q7.gateup", 37888, 3584},
  };
  const std::vector<Variant> variants = {{"auto", 0, 0}, {"1/24", 1, 24}, {"1/32", 1, 32}, {"2/16", 2, 16},
                                         {"2/24", 2, 24}, {"2/32", 2, 32}, {"4/12", 4, 12}, {"4/16", 4, 16},
                                         {"4/24", 4, 24}};
  const int group = 128, max_m = *std::max_element(tokens.begin(), tokens.end());
  std::printf("%-12s %3s %3s", "layer", "zp", "m");
  for (const auto &v : variants) std::printf(" %7s", v.name);
  std::printf("   | largest error / sum |x w|\n");
  for (const auto &layer : layers) {
    const int n = layer.n, k = layer.k;
    const size_t weight_bytes = size_t(n) * k / 2, scale_count = size_t(k / group) * n;
    const int copies = std::max<int>(2, int((size_t(3) * prop.l2CacheSize + weight_bytes - 1) / weight_bytes));
    std::vector<uint8_t *> w(copies);
    std::vector<__nv_bfloat16 *> s(copies), z(copies);
    for (int c = 0; c < copies; ++c) {
      CHECK_CUDA(cudaMalloc(&w[c], weight_bytes));
      CHECK_CUDA(cudaMalloc(&s[c], scale_count * 2));
      CHECK_CUDA(cudaMalloc(&z[c], scale_count * 2));
      fill_words<<<1024, 256, 0, stream>>>(reinterpret_cast<uint32_t *>(w[c]), weight_bytes / 4, 11 + c);
      fill_bf16<<<1024, 256, 0, stream>>>(s[c], scale_count, 1000 + c, 0.001f, 0.01f);
      fill_bf16<<<1024, 256, 0, stream>>>(z[c], scale_count, 2000 + c, -0.08f, 0.0f);
    }
    __nv_bfloat16 *x, *y;
    float *ref, *mag;
    CHECK_CUDA(cudaMalloc(&x, size_t(max_m) * k * 2));
    CHECK_CUDA(cudaMalloc(&y, size_t(max_m) * n * 2));
    CHECK_CUDA(cudaMalloc(&ref, size_t(max_m) * n * 4));
    CHECK_CUDA(cudaMalloc(&mag, size_t(max_m) * n * 4));
    fill_bf16<<<1024, 256, 0, stream>>>(x, size_t(max_m) * k, 77, -1.0f, 1.0f);
    for (int zp = 0; zp < 2; ++zp) {
      for (const int m : tokens) {
        cutlass_rs_weight_only_args a{};
        a.m = m;
        a.n = n;
        a.k = k;
        a.group_size = group;
        a.x = x;
        a.ldx = k;
        a.d = y;
        a.ldd = n;
        a.alpha = 1.f;
        a.device_id = 0;
        a.sm_count = prop.multiProcessorCount;
        a.activation = CUTLASS_RS_ACTIVATION_IDENTITY;
        const auto use = [&](int c) {
          a.w = w[c];
          a.scales = s[c];
          a.zeros = zp ? z[c] : nullptr;
        };
        reference<<<dim3((n + 127) / 128, m), 128, 0, stream>>>(m, n, k, group, x, w[0], s[0], z[0], zp, ref, mag);
        std::vector<float> want(size_t(m) * n), sums(size_t(m) * n);
        CHECK_CUDA(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(sums.data(), mag, sums.size() * 4, cudaMemcpyDeviceToHost));
        std::printf("%-12s %3d %3d", layer.name, zp, m);
        double worst = 0;
        for (const auto &v : variants) {
          const auto run = [&] {
            const Shape shape{v.slices, v.resident};
            const int status = v.slices == 0 ? cutlass_rs_weight_gemv(&a, CUTLASS_RS_DTYPE_BF16, zp, 1, stream)
                               : zp        ? launch<__nv_bfloat16, true>(a, stream, shape)
                                           : launch<__nv_bfloat16, false>(a, stream, shape);
            if (status != 0) {
              std::printf("\nstatus %d\n", status);
              std::exit(1);
            }
          };
          use(0);
          CHECK_CUDA(cudaMemsetAsync(y, 0xFF, size_t(m) * n * 2, stream));
          run();
          std::vector<__nv_bfloat16> got(size_t(m) * n);
          CHECK_CUDA(cudaMemcpyAsync(got.data(), y, got.size() * 2, cudaMemcpyDeviceToHost, stream));
          CHECK_CUDA(cudaStreamSynchronize(stream));
          for (size_t i = 0; i < got.size(); ++i) {
            const double e = std::fabs(double(__bfloat162float(got[i])) - want[i]) / (sums[i] + 1e-30);
            worst = std::max(worst, e == e ? e : 1e30);
          }
          for (int i = 0; i < 3; ++i) {
            use(i % copies);
            run();
          }
          std::vector<float> rounds;
          for (int r = 0; r < 5; ++r) {
            CHECK_CUDA(cudaEventRecord(e0, stream));
            for (int i = 0; i < 20; ++i) {
              use((r * 20 + i) % copies);
              run();
            }
            CHECK_CUDA(cudaEventRecord(e1, stream));
            CHECK_CUDA(cudaEventSynchronize(e1));
            float ms;
            CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
            rounds.push_back(ms * 1000.f / 20);
          }
          std::sort(rounds.begin(), rounds.end());
          std::printf(" %7.2f", rounds[2]);
        }
        std::printf("   | %.1e\n", worst);
        std::fflush(stdout);
      }
    }
    for (int c = 0; c < copies; ++c) {
      CHECK_CUDA(cudaFree(w[c]));
      CHECK_CUDA(cudaFree(s[c]));
      CHECK_CUDA(cudaFree(z[c]));
    }
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(y));
    CHECK_CUDA(cudaFree(ref));
    CHECK_CUDA(cudaFree(mag));
  }
  return 0;
}
