// The weight-only GEMM kernels' C++ side (SM90 mixed-input kernels over packed 4-bit weights and
// row-major e4m3 ones). Part of cutlass-gemm-sys (csrc/); not generated. Included by the generated
// weight-only kernels after cutlass_rs_shim.hpp.
//
// The kernel computes Y^T = dequant(W) . X^T (cutlass_rs_weight_only_abi.h): W, n x k (4-bit: in
// the packed order of cutlass_rs_weight_layout.hpp; e4m3: row-major), is the MMA's A, converted in
// registers; X (m x k row-major) is its B, k x m column-major; Y^T is n x m column-major, which is
// Y row-major.
#pragma once

#include "cutlass_rs_shim.hpp"
#include "cutlass_rs_weight_layout.hpp"
#include "cutlass_rs_weight_only_abi.h"

namespace cutlass_rs {
namespace weight {

inline bool fits(const cutlass_rs_weight_only_args *a) {
  return fits_int(a->m) && fits_int(a->n) && fits_int(a->k) && a->m >= 1 && a->n >= 1 && a->k >= 1 &&
         a->group_size >= 1 && a->group_size <= a->k;
}

template <class Gemm>
constexpr bool takes_zeros() {
  using Mainloop = typename Gemm::GemmKernel::CollectiveMainloop;
  return Mainloop::KernelConversionMode == cutlass::detail::ConversionMode::ConvertAndScaleWithZero;
}

// Whether the kernel reads a 4-bit weight in the packed order (else an 8-bit one as stored).
template <class Gemm>
constexpr bool packed_weight() {
  using Mainloop = typename Gemm::GemmKernel::CollectiveMainloop;
  return cutlass::sizeof_bits<typename Mainloop::ElementA>::value == 4;
}

template <class Gemm>
int check_pointers(const cutlass_rs_weight_only_args *a) noexcept {
  if (a == nullptr || a->x == nullptr || a->w == nullptr || a->scales == nullptr || a->c == nullptr ||
      a->d == nullptr)
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (takes_zeros<Gemm>() != (a->zeros != nullptr)) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (!fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  if (a->n % CUTLASS_RS_WEIGHT_PACK_ROWS != 0 || a->k % CUTLASS_RS_WEIGHT_PACK_COLS != 0 ||
      a->k % a->group_size != 0)
    return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  return CUTLASS_RS_OK;
}

template <class Gemm>
typename Gemm::Arguments make_arguments(const cutlass_rs_weight_only_args *a) {
  using Kernel = typename Gemm::GemmKernel;
  using Mainloop = typename Kernel::CollectiveMainloop;
  using Wide = typename Kernel::ElementB;
  const int n = static_cast<int>(a->n), m = static_cast<int>(a->m), k = static_cast<int>(a->k);
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  // The swapped problem: rows of W, then tokens.
  args.problem_shape = {n, m, k, 1};
  args.mainloop.ptr_A = static_cast<decltype(args.mainloop.ptr_A)>(a->w);
  if constexpr (packed_weight<Gemm>()) {
    args.mainloop.dA = packed_layout<Wide>(n, k);
  } else {
    args.mainloop.dA = make_stride<typename Kernel::StrideA>(a->k, int64_t(a->n) * a->k);
  }
  args.mainloop.ptr_B = static_cast<decltype(args.mainloop.ptr_B)>(a->x);
  args.mainloop.dB = make_stride<typename Kernel::StrideB>(a->ldx, a->ldx * a->m);
  args.mainloop.ptr_S = static_cast<decltype(args.mainloop.ptr_S)>(a->scales);
  const int64_t groups = a->k / a->group_size;
  typename Mainloop::NonVoidStrideScale ds{};
  cute::get<1>(ds) = a->n;
  cute::get<2>(ds) = a->n * groups;
  args.mainloop.dS = ds;
  args.mainloop.group_size = static_cast<int>(a->group_size);
  args.mainloop.ptr_Z = static_cast<decltype(args.mainloop.ptr_Z)>(a->zeros);
  args.epilogue.ptr_C = static_cast<decltype(args.epilogue.ptr_C)>(a->c);
  args.epilogue.dC = make_stride<typename Kernel::StrideC>(a->ldc, a->ldc * a->m);
  args.epilogue.ptr_D = static_cast<decltype(args.epilogue.ptr_D)>(a->d);
  args.epilogue.dD = make_stride<typename Kernel::StrideD>(a->ldd, a->ldd * a->m);
  if constexpr (has_alpha<decltype(args.epilogue.thread)>::value) {
    args.epilogue.thread.alpha = a->alpha;
    args.epilogue.thread.beta = a->beta;
  } else {
    // The fused epilogue (cutlass_rs_epilogue.hpp), over the same fields of the GEMM ABI.
    cutlass_rs_gemm_args fused{};
    fused.alpha = a->alpha;
    fused.beta = a->beta;
    fused.row_scale = a->row_scale;
    fused.col_scale = a->col_scale;
    fused.row_bias = a->row_bias;
    fused.col_bias = a->col_bias;
    fused.activation = a->activation;
    args.epilogue.thread = fused_arguments<decltype(args.epilogue.thread)>(&fused);
  }
  args.hw_info.device_id = a->device_id;
  args.hw_info.sm_count = a->sm_count;
  if constexpr (has_splits<decltype(args.scheduler)>::value) {
    if (a->splits > 1) args.scheduler.splits = a->splits;
  }
  return args;
}

template <class Gemm>
int can_implement(const cutlass_rs_weight_only_args *a) noexcept {
  try {
    int status = check_pointers<Gemm>(a);
    if (status != CUTLASS_RS_OK) return status;
    return static_cast<int>(Gemm::can_implement(make_arguments<Gemm>(a)));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

template <class Gemm>
int workspace_size(const cutlass_rs_weight_only_args *a, size_t *bytes) noexcept {
  try {
    if (a == nullptr || bytes == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
    if (!fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
    *bytes = Gemm::get_workspace_size(make_arguments<Gemm>(a));
    return CUTLASS_RS_OK;
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

template <class Gemm>
int prepare(const cutlass_rs_weight_only_args *a, void *workspace, size_t workspace_bytes) noexcept {
  try {
    int status = can_implement<Gemm>(a);
    if (status != CUTLASS_RS_OK) return status;
    auto args = make_arguments<Gemm>(a);
    if (Gemm::get_workspace_size(args) > workspace_bytes) return CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL;
    bool tma_refused = false;
    {
      CerrCapture capture;
      auto params = Gemm::GemmKernel::to_underlying_arguments(args, workspace);
      (void)params;
      tma_refused = capture.text.str().find("Failed to initialize the TMA descriptor") != std::string::npos;
    }
    if (tma_refused) return CUTLASS_RS_ERROR_TMA_DESCRIPTOR;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
    return CUTLASS_RS_OK;
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

// This thread's last launch state of a kernel on a device, with the arguments it was built from.
template <class Gemm>
struct WeightOnlyState {
  cutlass_rs_weight_only_args key{};
  LaunchState<Gemm> launch;
};

template <class Gemm>
WeightOnlyState<Gemm> &state(int device) {
  thread_local std::unique_ptr<WeightOnlyState<Gemm>> states[kLaunchSlots];
  std::unique_ptr<WeightOnlyState<Gemm>> &slot = states[static_cast<unsigned>(device) % kLaunchSlots];
  if (!slot) slot = std::make_unique<WeightOnlyState<Gemm>>();
  return *slot;
}

static_assert(offsetof(cutlass_rs_weight_only_args, activation) + sizeof(int32_t) ==
                  sizeof(cutlass_rs_weight_only_args),
              "no trailing padding: compared bytewise");

template <class Gemm>
int run(const cutlass_rs_weight_only_args *a, void *workspace, size_t workspace_bytes, void *stream) noexcept {
  try {
    using Kernel = typename Gemm::GemmKernel;
    int status = check_pointers<Gemm>(a);
    if (status != CUTLASS_RS_OK) return status;
    status = check_current_device(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    WeightOnlyState<Gemm> &s = state<Gemm>(a->device_id);
    const bool hit = s.launch.valid && s.launch.workspace == workspace &&
                     std::memcmp(&s.key, a, sizeof(cutlass_rs_weight_only_args)) == 0;
    if (!hit) {
      auto args = make_arguments<Gemm>(a);
      cutlass::Status st = Gemm::can_implement(args);
      if (st != cutlass::Status::kSuccess) return static_cast<int>(st);
      if (Gemm::get_workspace_size(args) > workspace_bytes) return CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL;
      s.launch.valid = false;
      s.launch.params = Kernel::to_underlying_arguments(args, workspace);
      s.launch.args = args;
      s.launch.grid = Kernel::get_grid_shape(s.launch.params);
      s.launch.block = Kernel::get_block_shape();
      s.launch.key = cutlass_rs_gemm_args{};  // launch_flags 0: no programmatic dependent launch
      s.launch.workspace = workspace;
      s.key = *a;
      s.launch.valid = true;
      cutlass_rs_note_launch_state_build();
    }
    status = ensure_function_attributes<Kernel>(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    return launch_status(s.launch, static_cast<cudaStream_t>(stream));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

}  // namespace weight
}  // namespace cutlass_rs

// Defines the four extern "C" entry points of one weight-only kernel over its Gemm type.
#define CUTLASS_RS_DEFINE_WEIGHT_ONLY_ENTRY_POINTS(NAME, GEMM)                                      \
  extern "C" int NAME##_can_implement(const cutlass_rs_weight_only_args *args) {                   \
    return cutlass_rs::weight::can_implement<GEMM>(args);                                          \
  }                                                                                                \
  extern "C" int NAME##_workspace_size(const cutlass_rs_weight_only_args *args, size_t *bytes) {   \
    return cutlass_rs::weight::workspace_size<GEMM>(args, bytes);                                  \
  }                                                                                                \
  extern "C" int NAME##_run(const cutlass_rs_weight_only_args *args, void *workspace,              \
                            size_t workspace_bytes, void *stream) {                                \
    return cutlass_rs::weight::run<GEMM>(args, workspace, workspace_bytes, stream);                \
  }                                                                                                \
  extern "C" int NAME##_prepare(const cutlass_rs_weight_only_args *args, void *workspace,          \
                                size_t workspace_bytes) {                                          \
    return cutlass_rs::weight::prepare<GEMM>(args, workspace, workspace_bytes);                    \
  }
