// Shared C++ helpers for the generated kernels. Part of cutlass-gemm-sys (csrc/); not generated.
// Included by every generated .cu after its CUTLASS includes.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <type_traits>

#include <cuda_runtime_api.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass_rs_abi.h"

namespace cutlass_rs {

// A CUTLASS 3.x stride (row, column, batch) with one static unit stride among the first two modes:
// the other one is the leading dimension.
template <class Stride>
inline Stride make_stride(int64_t ld, int64_t batch_stride) {
  Stride s{};
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value) {
    cute::get<0>(s) = ld;
  }
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(s))>>::value) {
    cute::get<1>(s) = ld;
  }
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<2>(s))>>::value) {
    cute::get<2>(s) = batch_stride;
  }
  return s;
}

inline bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

inline bool problem_fits(const cutlass_rs_gemm_args *a) {
  return fits_int(a->m) && fits_int(a->n) && fits_int(a->k) && fits_int(a->batch) && a->batch >= 1;
}

// Whether a mainloop takes scale factors (block-scaled mx/nv or blockwise f32).
template <class M, class = void>
struct takes_scales : std::false_type {};
template <class M>
struct takes_scales<M, std::void_t<typename M::LayoutSFA>> : std::true_type {};

// Whether an epilogue's arguments take a block-scaled output (LinCombBlockScaleFactor).
template <class T, class = void>
struct writes_scale_factors : std::false_type {};
template <class T>
struct writes_scale_factors<T, std::void_t<decltype(std::declval<T &>().block_scale_factor_ptr)>>
    : std::true_type {};

// Whether a mainloop is structured-sparse (compressed A plus metadata E).
template <class M, class = void>
struct is_sparse : std::false_type {};
template <class M>
struct is_sparse<M, std::void_t<typename M::LayoutE>> : std::true_type {};

// Whether a tile scheduler's arguments take a swizzle and raster order, and a split-K factor.
template <class T, class = void>
struct has_swizzle : std::false_type {};
template <class T>
struct has_swizzle<T, std::void_t<decltype(std::declval<T &>().max_swizzle_size),
                                  decltype(std::declval<T &>().raster_order)>> : std::true_type {};
template <class T, class = void>
struct has_splits : std::false_type {};
template <class T>
struct has_splits<T, std::void_t<decltype(std::declval<T &>().splits)>> : std::true_type {};

// The scale-factor layout config of a kernel: the block-scaled mainloop's own
// Sm1xxBlkScaledConfig, or the blockwise config its generated source names (ScaleConfig).
template <class Mainloop, class ScaleConfig, class = void>
struct scale_config { using type = ScaleConfig; };
template <class Mainloop, class ScaleConfig>
struct scale_config<Mainloop, ScaleConfig, std::void_t<typename Mainloop::Sm1xxBlkScaledConfig>> {
  using type = typename Mainloop::Sm1xxBlkScaledConfig;
};

// Whether an epilogue's arguments are CUTLASS's fusion operations' (alpha, beta, ...) rather than
// a visitor tree's (this crate's fused epilogue, cutlass_rs_epilogue.hpp).
template <class T, class = void>
struct has_alpha : std::false_type {};
template <class T>
struct has_alpha<T, std::void_t<decltype(std::declval<T &>().alpha)>> : std::true_type {};

// The fused epilogue's arguments (defined in cutlass_rs_epilogue.hpp, which its kernels include).
template <class Thread>
Thread fused_arguments(const cutlass_rs_gemm_args *a);

// Builds the CUTLASS 3.x arguments (LinearCombination epilogue) field by field, so one function
// serves the SM90, SM100 and SM120 collectives, block-scaled and blockwise ones included.
// ScaleConfig is the blockwise scale config (void for the other kernels).
template <class Gemm, class ScaleConfig = void>
typename Gemm::Arguments make_arguments(const cutlass_rs_gemm_args *a) {
  using Kernel = typename Gemm::GemmKernel;
  using Mainloop = typename Kernel::CollectiveMainloop;
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = {static_cast<int>(a->m), static_cast<int>(a->n), static_cast<int>(a->k),
                        static_cast<int>(a->batch)};
  args.mainloop.ptr_A = static_cast<decltype(args.mainloop.ptr_A)>(a->a);
  args.mainloop.ptr_B = static_cast<decltype(args.mainloop.ptr_B)>(a->b);
  args.mainloop.dB = make_stride<typename Kernel::StrideB>(a->ldb, a->batch_stride_b);
  if constexpr (is_sparse<Mainloop>::value) {
    // Compressed A and its metadata are packed in the SparseConfig's layouts (lda is unused).
    using SparseConfig = typename Mainloop::SparseConfig;
    auto shape = cute::make_shape(static_cast<int>(a->m), static_cast<int>(a->n), static_cast<int>(a->k),
                                  static_cast<int>(a->batch));
    args.mainloop.layout_a = SparseConfig::fill_layoutA(shape);
    args.mainloop.ptr_E = static_cast<decltype(args.mainloop.ptr_E)>(a->e);
    args.mainloop.layout_e = SparseConfig::fill_layoutE(shape);
  } else {
    args.mainloop.dA = make_stride<typename Kernel::StrideA>(a->lda, a->batch_stride_a);
  }
  if constexpr (takes_scales<Mainloop>::value) {
    using Config = typename scale_config<Mainloop, ScaleConfig>::type;
    auto shape = cute::make_shape(static_cast<int>(a->m), static_cast<int>(a->n), static_cast<int>(a->k),
                                  static_cast<int>(a->batch));
    args.mainloop.ptr_SFA = static_cast<decltype(args.mainloop.ptr_SFA)>(a->sfa);
    args.mainloop.layout_SFA = Config::tile_atom_to_shape_SFA(shape);
    args.mainloop.ptr_SFB = static_cast<decltype(args.mainloop.ptr_SFB)>(a->sfb);
    args.mainloop.layout_SFB = Config::tile_atom_to_shape_SFB(shape);
  }
  args.epilogue.ptr_C = static_cast<decltype(args.epilogue.ptr_C)>(a->c);
  args.epilogue.dC = make_stride<typename Kernel::StrideC>(a->ldc, a->batch_stride_c);
  args.epilogue.ptr_D = static_cast<decltype(args.epilogue.ptr_D)>(a->d);
  args.epilogue.dD = make_stride<typename Kernel::StrideD>(a->ldd, a->batch_stride_d);
  if constexpr (has_alpha<decltype(args.epilogue.thread)>::value) {
    args.epilogue.thread.alpha = a->alpha;
    args.epilogue.thread.beta = a->beta;
  } else {
    args.epilogue.thread = fused_arguments<decltype(args.epilogue.thread)>(a);
  }
  if constexpr (writes_scale_factors<decltype(args.epilogue.thread)>::value) {
    args.epilogue.thread.block_scale_factor_ptr =
        static_cast<decltype(args.epilogue.thread.block_scale_factor_ptr)>(a->sfd);
    args.epilogue.thread.norm_constant_ptr = a->norm_constant;
  }
  args.hw_info.device_id = a->device_id;
  args.hw_info.sm_count = a->sm_count;
  if constexpr (has_swizzle<decltype(args.scheduler)>::value) {
    using Raster = decltype(args.scheduler.raster_order);
    if (a->swizzle > 0) args.scheduler.max_swizzle_size = a->swizzle;
    if (a->raster == 1) args.scheduler.raster_order = Raster::AlongM;
    if (a->raster == 2) args.scheduler.raster_order = Raster::AlongN;
  }
  if constexpr (has_splits<decltype(args.scheduler)>::value) {
    if (a->splits > 1) args.scheduler.splits = a->splits;
  }
  return args;
}

// The argument checks that need no CUTLASS arguments: null pointers a kernel reads, and extents
// that fit CUTLASS's int problem shape.
template <class Gemm>
int check_pointers(const cutlass_rs_gemm_args *a) noexcept {
  if (a == nullptr || a->a == nullptr || a->b == nullptr || a->c == nullptr || a->d == nullptr)
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (takes_scales<typename Gemm::GemmKernel::CollectiveMainloop>::value && (a->sfa == nullptr || a->sfb == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (is_sparse<typename Gemm::GemmKernel::CollectiveMainloop>::value && a->e == nullptr)
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (writes_scale_factors<decltype(typename Gemm::Arguments{}.epilogue.thread)>::value &&
      (a->sfd == nullptr || a->norm_constant == nullptr))
    return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if (!problem_fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  return CUTLASS_RS_OK;
}

template <class Gemm, class ScaleConfig = void>
int can_implement(const cutlass_rs_gemm_args *a) noexcept {
  try {
    int status = check_pointers<Gemm>(a);
    if (status != CUTLASS_RS_OK) return status;
    auto args = make_arguments<Gemm, ScaleConfig>(a);
    return static_cast<int>(Gemm::can_implement(args));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

template <class Gemm, class ScaleConfig = void>
int workspace_size(const cutlass_rs_gemm_args *a, size_t *bytes) noexcept {
  try {
    if (a == nullptr || bytes == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
    if (!problem_fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
    auto args = make_arguments<Gemm, ScaleConfig>(a);
    *bytes = Gemm::get_workspace_size(args);
    return CUTLASS_RS_OK;
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

// CUTLASS reports a TMA descriptor the driver refuses (cuTensorMapEncodeTiled) on std::cerr and
// carries on. prepare() captures std::cerr while it builds the kernel parameters and turns that
// report into a status. The capture is serialized; other threads' std::cerr output during it would
// be captured too, which is why run() does not do this.
struct CerrCapture {
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  std::lock_guard<std::mutex> lock{mutex()};
  std::ostringstream text;
  std::streambuf *saved;
  CerrCapture() : saved(std::cerr.rdbuf(text.rdbuf())) {}
  ~CerrCapture() { std::cerr.rdbuf(saved); }
  CerrCapture(const CerrCapture &) = delete;
  CerrCapture &operator=(const CerrCapture &) = delete;
};

template <class Gemm, class ScaleConfig = void>
int prepare(const cutlass_rs_gemm_args *a, void *workspace, size_t workspace_bytes) noexcept {
  try {
    int status = can_implement<Gemm, ScaleConfig>(a);
    if (status != CUTLASS_RS_OK) return status;
    auto args = make_arguments<Gemm, ScaleConfig>(a);
    if (Gemm::get_workspace_size(args) > workspace_bytes) return CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL;
    // The kernel parameters, as GemmUniversalAdapter::initialize builds them (TMA descriptors
    // encoded by the driver), without its cudaFuncSetAttribute on the kernel, which needs a
    // device that can run it.
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

// The kernel's function attributes, set once per device: the dynamic shared memory opt-in, and for
// SM90 cluster kernels the non-portable cluster size CUTLASS's ClusterLauncher allows. CUTLASS's
// GemmUniversalAdapter sets both before every launch (a cudaFuncSetAttribute each, about a
// microsecond of host time). cudaFuncSetAttribute acts on the calling thread's current device,
// which run() has checked to be `device`; one bit per device ordinal records it, and devices past
// the bits set them at every launch.
template <class Kernel>
int ensure_function_attributes(int device) noexcept {
  constexpr int kWords = 4;
  static std::atomic<uint64_t> done[kWords]{};
  const bool tracked = device >= 0 && device < 64 * kWords;
  const uint64_t bit = uint64_t{1} << (static_cast<unsigned>(device) & 63u);
  std::atomic<uint64_t> *word = tracked ? &done[device / 64] : nullptr;
  if (word != nullptr && (word->load(std::memory_order_acquire) & bit)) return CUTLASS_RS_OK;
  const void *kernel = reinterpret_cast<const void *>(cutlass::device_kernel<Kernel>);
  constexpr int smem = Kernel::SharedStorageSize;
  cudaError_t e = cudaSuccess;
  if constexpr (smem >= (48 << 10)) {
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  }
  if constexpr (Kernel::ArchTag::kMinComputeCapability == 90) {
    if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  }
  if (word != nullptr) word->fetch_or(bit, std::memory_order_release);
  return CUTLASS_RS_OK;
}

// The calling thread's current CUDA device must be the one the arguments name: the kernel's
// function attributes, its TMA descriptors and its launch all act on the current device.
inline int check_current_device(int32_t device_id) noexcept {
  int current = -1;
  cudaError_t e = cudaGetDevice(&current);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  }
  return current == device_id ? CUTLASS_RS_OK : CUTLASS_RS_ERROR_WRONG_DEVICE;
}

// Launches compare the arguments bytewise: no padding anywhere, the last field ends the struct.
static_assert(offsetof(cutlass_rs_gemm_args, reserved) + sizeof(int32_t) ==
                  sizeof(cutlass_rs_gemm_args),
              "no trailing padding: compared bytewise");

// What the last launch of a kernel on this thread and device was built from and launched with: the
// arguments (pointers and device included: the TMA descriptors encode them), the workspace,
// CUTLASS's arguments and kernel parameters, and the launch shape. Reused while the arguments and
// workspace are the same, so steady-state calls with the same buffers cost a compare and the launch.
template <class Gemm>
struct LaunchState {
  using Kernel = typename Gemm::GemmKernel;
  bool valid = false;
  cutlass_rs_gemm_args key{};
  void *workspace = nullptr;
  typename Gemm::Arguments args{};
  typename Kernel::Params params{};
  dim3 grid{};
  dim3 block{};
};

// Launch states are kept per thread, per kernel and per device: one slot for each device ordinal
// modulo kLaunchSlots, so that a thread alternating between devices keeps each device's state.
// Ordinals that share a slot only rebuild the state (the key holds the device), never reuse
// another device's. The states live on the heap, allocated at a slot's first use: thread-local
// storage is reserved in every thread of the process for every kernel of the library.
constexpr int kLaunchSlots = 8;

// The device of this thread's last run() of a kernel that built or reused a launch state (-1
// before the first): what relaunch() repeats.
template <class Gemm>
int &last_launch_device() {
  thread_local int device = -1;
  return device;
}

template <class Gemm>
LaunchState<Gemm> &launch_state(int device) {
  thread_local std::unique_ptr<LaunchState<Gemm>> states[kLaunchSlots];
  std::unique_ptr<LaunchState<Gemm>> &slot = states[static_cast<unsigned>(device) % kLaunchSlots];
  if (!slot) slot = std::make_unique<LaunchState<Gemm>>();
  return *slot;
}

// Whether this translation unit's kernel is compiled with CUTLASS's grid dependency control (the
// generated source defines CUTLASS_ENABLE_GDC_FOR_SM90 for the kernels the catalog marks with
// supports_programmatic_dependent_launch). Only those may be launched with programmatic stream
// serialization: the others would not wait for the kernel before them.
#ifdef CUTLASS_ENABLE_GDC_FOR_SM90
constexpr bool kGridDependencyControl = true;
#else
constexpr bool kGridDependencyControl = false;
#endif

// Launches a kernel from its cached state: the workspace reset (stream-K and split-K reduce through
// the workspace, which must be zeroed before each launch; a no-op for the other schedulers), then
// the launch. SM90 kernels go straight to cudaLaunchKernelEx with the launch configuration
// GemmUniversalAdapter::run builds (grid, block, shared memory, the cluster shape and, when the
// arguments ask for it and the kernel has grid dependency control, programmatic stream
// serialization as launch attributes) but without its per-call cudaFuncSetAttribute; SM100/SM120
// kernels (dynamic cluster shapes, fallback clusters) go through GemmUniversalAdapter::run.
template <class Gemm>
cutlass::Status launch(LaunchState<Gemm> &s, cudaStream_t stream) {
  using Kernel = typename Gemm::GemmKernel;
  cutlass::Status st = Kernel::initialize_workspace(s.args, s.workspace, stream);
  if (st != cutlass::Status::kSuccess) return st;
  if constexpr (Kernel::ArchTag::kMinComputeCapability == 90) {
    using Cluster = typename Kernel::DispatchPolicy::ClusterShape;
    static_assert(cute::is_static_v<Cluster>, "SM90 kernels have a static cluster shape");
    // CUTLASS 4.2's cooperative kernel does not wait in its auxiliary-load warp (blockwise
    // scales): such a kernel must never be launched early.
    static_assert(!kGridDependencyControl ||
                      !cutlass::gemm::kernel::detail::HasAuxiliaryLoad_v<
                          typename Kernel::CollectiveMainloop::DispatchPolicy>,
                  "programmatic dependent launch needs every producer warp to wait");
    cudaLaunchAttribute attribute[2];
    cudaLaunchConfig_t config{};
    config.gridDim = s.grid;
    config.blockDim = s.block;
    config.dynamicSmemBytes = Kernel::SharedStorageSize;
    config.stream = stream;
    config.attrs = attribute;
    if constexpr (cute::size(Cluster{}) > 1) {
      attribute[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
      attribute[config.numAttrs].val.clusterDim.x = cute::size<0>(Cluster{});
      attribute[config.numAttrs].val.clusterDim.y = cute::size<1>(Cluster{});
      attribute[config.numAttrs].val.clusterDim.z = cute::size<2>(Cluster{});
      ++config.numAttrs;
    }
    if constexpr (kGridDependencyControl) {
      if (s.key.launch_flags & CUTLASS_RS_LAUNCH_PDL) {
        attribute[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attribute[config.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        ++config.numAttrs;
      }
    }
    if (config.numAttrs == 0) config.attrs = nullptr;
    void *kernel_params[] = {&s.params};
    cudaError_t e = cudaLaunchKernelExC(&config, reinterpret_cast<const void *>(cutlass::device_kernel<Kernel>),
                                        kernel_params);
    return e == cudaSuccess ? cutlass::Status::kSuccess : cutlass::Status::kErrorInternal;
  } else {
    return Gemm::run(s.params, stream);
  }
}

template <class Gemm>
int launch_status(LaunchState<Gemm> &s, cudaStream_t stream) {
  cutlass::Status st = launch(s, stream);
  cudaError_t e = cudaGetLastError();
  if (st != cutlass::Status::kSuccess) {
    s.valid = false;
    if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
    return static_cast<int>(st);
  }
  if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
  return CUTLASS_RS_OK;
}

template <class Gemm, class ScaleConfig = void>
int run(const cutlass_rs_gemm_args *a, void *workspace, size_t workspace_bytes, void *stream) noexcept {
  try {
    using Kernel = typename Gemm::GemmKernel;
    int status = check_pointers<Gemm>(a);
    if (status != CUTLASS_RS_OK) return status;
    status = check_current_device(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    LaunchState<Gemm> &s = launch_state<Gemm>(a->device_id);
    const bool hit = s.valid && s.workspace == workspace &&
                     std::memcmp(&s.key, a, sizeof(cutlass_rs_gemm_args)) == 0;
    if (!hit) {
      auto args = make_arguments<Gemm, ScaleConfig>(a);
      cutlass::Status st = Gemm::can_implement(args);
      if (st != cutlass::Status::kSuccess) return static_cast<int>(st);
      if (Gemm::get_workspace_size(args) > workspace_bytes) return CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL;
      s.valid = false;
      s.params = Kernel::to_underlying_arguments(args, workspace);
      s.args = args;
      s.grid = Kernel::get_grid_shape(s.params);
      s.block = Kernel::get_block_shape();
      s.key = *a;
      s.workspace = workspace;
      s.valid = true;
      cutlass_rs_note_launch_state_build();
    }
    status = ensure_function_attributes<Kernel>(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    last_launch_device<Gemm>() = a->device_id;
    return launch_status(s, static_cast<cudaStream_t>(stream));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

// Launches the kernel again from the state this thread's last successful run() left: the same
// arguments, workspace and parameters (and so the same device), with none of run()'s checks or its
// argument compare. This is the bare launch `cutlass-profiler overhead` measures run() against.
// Without such a run it returns CUTLASS_RS_ERROR_INVALID before any CUDA call.
template <class Gemm>
int relaunch(void *stream) noexcept {
  try {
    const int device = last_launch_device<Gemm>();
    if (device < 0) return CUTLASS_RS_ERROR_INVALID;
    LaunchState<Gemm> &s = launch_state<Gemm>(device);
    if (!s.valid || s.key.device_id != device) return CUTLASS_RS_ERROR_INVALID;
    return launch_status(s, static_cast<cudaStream_t>(stream));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

}  // namespace cutlass_rs

// Defines the five extern "C" entry points of one kernel over its Gemm type and, for blockwise
// kernels, their scale config (void otherwise).
#define CUTLASS_RS_DEFINE_SCALED_ENTRY_POINTS(NAME, GEMM, SCALE_CONFIG)                             \
  extern "C" int NAME##_can_implement(const cutlass_rs_gemm_args *args) {                          \
    return cutlass_rs::can_implement<GEMM, SCALE_CONFIG>(args);                                    \
  }                                                                                                \
  extern "C" int NAME##_workspace_size(const cutlass_rs_gemm_args *args, size_t *bytes) {          \
    return cutlass_rs::workspace_size<GEMM, SCALE_CONFIG>(args, bytes);                            \
  }                                                                                                \
  extern "C" int NAME##_run(const cutlass_rs_gemm_args *args, void *workspace, size_t workspace_bytes, \
                            void *stream) {                                                        \
    return cutlass_rs::run<GEMM, SCALE_CONFIG>(args, workspace, workspace_bytes, stream);          \
  }                                                                                                \
  extern "C" int NAME##_prepare(const cutlass_rs_gemm_args *args, void *workspace,                 \
                                size_t workspace_bytes) {                                          \
    return cutlass_rs::prepare<GEMM, SCALE_CONFIG>(args, workspace, workspace_bytes);              \
  }                                                                                                \
  extern "C" int NAME##_relaunch(void *stream) { return cutlass_rs::relaunch<GEMM>(stream); }

// Defines the entry points of a kernel without blockwise scales.
#define CUTLASS_RS_DEFINE_ENTRY_POINTS(NAME, GEMM) CUTLASS_RS_DEFINE_SCALED_ENTRY_POINTS(NAME, GEMM, void)
