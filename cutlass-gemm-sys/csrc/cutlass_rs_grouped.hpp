// The grouped GEMM kernels' C++ side (SM90, SM100 and SM120 pointer-array kernels). Part of cutlass-gemm-sys (csrc/);
// not generated. Included by the generated grouped kernels after cutlass_rs_shim.hpp.
//
// run() launches two kernels on the stream: build_groups, which turns the layout of
// cutlass_rs_grouped_args (contiguous offsets, masked counts or a problem list, all on the device)
// into the arrays CUTLASS's grouped kernel reads (extents, operand pointers, strides, alphas) in
// the workspace, and then the GEMM. Nothing is read back on the host, so a masked launch can be
// captured in a CUDA graph and replayed with new counts.
#pragma once

#include <type_traits>

#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass_rs_grouped_abi.h"
#include "cutlass_rs_shim.hpp"

namespace cutlass_rs {
namespace grouped {

// A CUTLASS stride (row, column, group) with one static unit mode among the first two: the other is
// the leading dimension (the group mode is unused: each group has its own pointer).
template <class Stride>
__host__ __device__ inline Stride leading(int64_t ld) {
  Stride s{};
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(s))>>::value) {
    cute::get<0>(s) = ld;
  }
  if constexpr (!cute::is_static<cute::remove_cvref_t<decltype(cute::get<1>(s))>>::value) {
    cute::get<1>(s) = ld;
  }
  return s;
}

// What a grouped kernel's mainloop takes besides A and B: nothing, blockwise f32 scales (SM90 FP8
// blockwise), or block scale factors (SM100/SM120 MX and NVFP4, Sm1xxBlockScaledConfig layout); the
// last two a pointer and a layout per group for each of A and B. Public CUTLASS types only, as
// GroupArrays takes.
struct NoScales {
  static constexpr bool enabled = false;
  static constexpr bool block_scaled = false;
  using ElementSF = float;
};

template <class Config_, class LayoutSFA_, class LayoutSFB_, int M, int N, int K>
struct BlockwiseScales {
  static constexpr bool enabled = true;
  static constexpr bool block_scaled = false;
  using ElementSF = float;
  using Config = Config_;
  using LayoutSFA = LayoutSFA_;
  using LayoutSFB = LayoutSFB_;
  static constexpr int m = M;
  static constexpr int n = N;
  static constexpr int k = K;
};

// Scale factors of `Vec` elements of K each, in CUTLASS's Sm1xxBlockScaledConfig layout: per
// operand, 128-row blocks of 4 scale columns (512 bytes each), K blocks fastest.
template <class Config_, class ElementSF_, class LayoutSFA_, class LayoutSFB_, int Vec>
struct BlockScaledScales {
  static constexpr bool enabled = true;
  static constexpr bool block_scaled = true;
  using ElementSF = ElementSF_;
  using Config = Config_;
  using LayoutSFA = LayoutSFA_;
  using LayoutSFB = LayoutSFB_;
  static constexpr int vec = Vec;
};

template <class Mainloop, class = void>
struct BlockwiseOf {
  using type = NoScales;
};

template <class Mainloop>
struct BlockwiseOf<Mainloop, std::void_t<typename Mainloop::ScaleConfig, typename Mainloop::InternalLayoutSFA>> {
  using type = BlockwiseScales<typename Mainloop::ScaleConfig, typename Mainloop::InternalLayoutSFA,
                               typename Mainloop::InternalLayoutSFB, Mainloop::ScaleGranularityM,
                               Mainloop::ScaleGranularityN, Mainloop::ScaleGranularityK>;
};

template <class Mainloop, class = void>
struct ScalesOf {
  using type = typename BlockwiseOf<Mainloop>::type;
};

template <class Mainloop>
struct ScalesOf<Mainloop, std::void_t<typename Mainloop::Sm1xxBlkScaledConfig>> {
  using type = BlockScaledScales<typename Mainloop::Sm1xxBlkScaledConfig, typename Mainloop::ElementSF,
                                 typename Mainloop::InternalLayoutSFA, typename Mainloop::InternalLayoutSFB,
                                 Mainloop::SFVecSize>;
};

constexpr size_t kAlign = 256;
inline size_t round_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The per-group arrays in the workspace, each 256-byte aligned, then CUTLASS's workspace. A
// template over CUTLASS's types rather than the kernel's (which lives in the generated source's
// anonymous namespace, which a __global__ function's parameters cannot name).
template <class ElementA_, class ElementB_, class ElementC_, class ElementD_, class StrideA_,
          class StrideB_, class StrideC_, class StrideD_, class Shape_, class Scales_>
struct GroupArrays {
  using Scales = Scales_;
  using ElementA = ElementA_;
  using ElementB = ElementB_;
  using ElementC = ElementC_;
  using ElementD = ElementD_;
  using StrideA = StrideA_;
  using StrideB = StrideB_;
  using StrideC = StrideC_;
  using StrideD = StrideD_;
  using Shape = Shape_;
  // A column-major D (the catalog's swapped grouped kernels): the kernel computes each group's
  // Dᵀ = Bᵀ·Aᵀ, the weights (the caller's B) as its A and the group's rows as its N.
  static constexpr bool swapped =
      cute::is_static<cute::remove_cvref_t<decltype(cute::get<0>(StrideD_{}))>>::value;
  static_assert(!(swapped && Scales::enabled), "swapped grouped kernels take no scales");

  Shape *shapes;
  const ElementA **a;
  const ElementB **b;
  const ElementC **c;
  ElementD **d;
  StrideA *da;
  StrideB *db;
  StrideC *dc;
  StrideD *dd;
  float *alpha;
  // Blockwise and block-scaled kernels only (null otherwise): each group's scale pointers and
  // layouts.
  using ElementSF = typename Scales::ElementSF;
  const ElementSF **sfa;
  const ElementSF **sfb;
  void *layout_sfa;
  void *layout_sfb;
  void *cutlass_workspace;

  // The bytes of one group's scale layouts (none without scales).
  static constexpr size_t scale_layout_bytes() {
    if constexpr (Scales::enabled) {
      return sizeof(typename Scales::LayoutSFA) + sizeof(typename Scales::LayoutSFB);
    } else {
      return 0;
    }
  }

  // The bytes of the arrays for `groups` groups (CUTLASS's workspace follows).
  static size_t bytes(int64_t groups) {
    size_t g = static_cast<size_t>(groups);
    size_t scales = 0;
    if constexpr (Scales::enabled) {
      scales = 2 * round_up(g * sizeof(void *)) + round_up(g * sizeof(typename Scales::LayoutSFA)) +
               round_up(g * sizeof(typename Scales::LayoutSFB));
    }
    return round_up(g * sizeof(Shape)) + 4 * round_up(g * sizeof(void *)) +
           round_up(g * sizeof(StrideA)) + round_up(g * sizeof(StrideB)) + round_up(g * sizeof(StrideC)) +
           round_up(g * sizeof(StrideD)) + round_up(g * sizeof(float)) + scales;
  }

  static GroupArrays carve(void *workspace, int64_t groups) {
    size_t g = static_cast<size_t>(groups);
    char *p = static_cast<char *>(workspace);
    auto take = [&](size_t n) {
      char *q = p;
      p += round_up(n);
      return q;
    };
    GroupArrays r;
    r.shapes = reinterpret_cast<Shape *>(take(g * sizeof(Shape)));
    r.a = reinterpret_cast<const ElementA **>(take(g * sizeof(void *)));
    r.b = reinterpret_cast<const ElementB **>(take(g * sizeof(void *)));
    r.c = reinterpret_cast<const ElementC **>(take(g * sizeof(void *)));
    r.d = reinterpret_cast<ElementD **>(take(g * sizeof(void *)));
    r.da = reinterpret_cast<StrideA *>(take(g * sizeof(StrideA)));
    r.db = reinterpret_cast<StrideB *>(take(g * sizeof(StrideB)));
    r.dc = reinterpret_cast<StrideC *>(take(g * sizeof(StrideC)));
    r.dd = reinterpret_cast<StrideD *>(take(g * sizeof(StrideD)));
    r.alpha = reinterpret_cast<float *>(take(g * sizeof(float)));
    r.sfa = nullptr;
    r.sfb = nullptr;
    r.layout_sfa = nullptr;
    r.layout_sfb = nullptr;
    if constexpr (Scales::enabled) {
      r.sfa = reinterpret_cast<const ElementSF **>(take(g * sizeof(void *)));
      r.sfb = reinterpret_cast<const ElementSF **>(take(g * sizeof(void *)));
      r.layout_sfa = take(g * sizeof(typename Scales::LayoutSFA));
      r.layout_sfb = take(g * sizeof(typename Scales::LayoutSFB));
    }
    r.cutlass_workspace = p;
    return r;
  }
};

template <class Gemm>
using Arrays = GroupArrays<typename Gemm::GemmKernel::ElementA, typename Gemm::GemmKernel::ElementB,
                           typename Gemm::GemmKernel::ElementC, typename Gemm::GemmKernel::ElementD,
                           typename Gemm::GemmKernel::InternalStrideA, typename Gemm::GemmKernel::InternalStrideB,
                           typename Gemm::GemmKernel::InternalStrideC, typename Gemm::GemmKernel::InternalStrideD,
                           typename Gemm::GemmKernel::ProblemShape::UnderlyingProblemShape,
                           typename ScalesOf<typename Gemm::GemmKernel::CollectiveMainloop>::type>;

__device__ inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }
__host__ __device__ inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// `base` advanced by `elements` of type T (sub-byte types: packed, `elements * bits / 8` bytes; the
// kernels' alignments keep every offset whole bytes).
template <class T>
__device__ inline T *advance(const void *base, int64_t elements) {
  const int64_t bytes = elements * static_cast<int64_t>(cutlass::sizeof_bits<T>::value) / 8;
  return reinterpret_cast<T *>(const_cast<char *>(static_cast<const char *>(base)) + bytes);
}

// One thread per group: the group's extents, operand pointers, strides and alpha from the layout.
template <class A>
__global__ void build_groups(cutlass_rs_grouped_args a, A out) {
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (g >= a.groups) return;
  int64_t m = 0, n = a.n, k = a.k, lda = a.lda, ldb = a.ldb, ldc = a.ldc, ldd = a.ldd;
  const char *pa = static_cast<const char *>(a.a);
  const char *pb = static_cast<const char *>(a.b);
  const char *pc = static_cast<const char *>(a.c);
  char *pd = static_cast<char *>(a.d);
  int64_t off_a = 0, off_b = 0, off_c = 0, off_d = 0;  // in elements
  int64_t first_row = 0;  // of the group in A's rows (scale rows), CONTIGUOUS and MASKED
  if (a.layout == CUTLASS_RS_GROUPED_CONTIGUOUS) {
    const int64_t start = clamp64(a.group_rows[g], 0, a.rows);
    const int64_t end = clamp64(a.group_rows[g + 1], start, a.rows);
    m = end - start;
    first_row = start;
    off_a = start * a.lda;
    off_b = g * a.batch_stride_b;
    off_c = start * a.ldc;
    off_d = start * a.ldd;
  } else if (a.layout == CUTLASS_RS_GROUPED_MASKED) {
    m = clamp64(a.group_rows[g], 0, a.rows);
    first_row = g * a.rows;
    off_a = g * a.batch_stride_a;
    off_b = g * a.batch_stride_b;
    off_c = g * a.batch_stride_c;
    off_d = g * a.batch_stride_d;
  } else {
    const cutlass_rs_grouped_problem p = a.problems[g];
    m = p.m;
    n = p.n;
    k = p.k;
    pa = static_cast<const char *>(p.a);
    pb = static_cast<const char *>(p.b);
    pc = static_cast<const char *>(p.c);
    pd = static_cast<char *>(p.d);
    lda = p.lda;
    ldb = p.ldb;
    ldc = p.ldc;
    ldd = p.ldd;
  }
  if constexpr (A::swapped) {
    // Dᵀ (n x m, column-major, leading dimension ldd) = B (n x k) · Aᵀ: the kernel's A is the
    // caller's B and its B the caller's A.
    out.shapes[g] = cute::make_shape(static_cast<int>(n), static_cast<int>(m), static_cast<int>(k));
    out.a[g] = advance<const typename A::ElementA>(pb, off_b);
    out.b[g] = advance<const typename A::ElementB>(pa, off_a);
    out.da[g] = leading<typename A::StrideA>(ldb);
    out.db[g] = leading<typename A::StrideB>(lda);
  } else {
    out.shapes[g] = cute::make_shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k));
    out.a[g] = advance<const typename A::ElementA>(pa, off_a);
    out.b[g] = advance<const typename A::ElementB>(pb, off_b);
    out.da[g] = leading<typename A::StrideA>(lda);
    out.db[g] = leading<typename A::StrideB>(ldb);
  }
  out.c[g] = advance<const typename A::ElementC>(pc, off_c);
  out.d[g] = advance<typename A::ElementD>(pd, off_d);
  out.dc[g] = leading<typename A::StrideC>(ldc);
  out.dd[g] = leading<typename A::StrideD>(ldd);
  out.alpha[g] = a.alphas != nullptr ? a.alpha * a.alphas[g] : a.alpha;
  if constexpr (A::Scales::block_scaled) {
    // Each group's scale factors are those of a tensor of its own (rows padded to 128, scale
    // columns to 4): A's start at row block start / 128 + g (CONTIGUOUS) or g * ceil(rows / 128)
    // (MASKED), B's at g * ceil(n / 128), in blocks of 128 rows of all the K blocks.
    using S = typename A::Scales;
    using SF = typename A::ElementSF;
    const int64_t cols = ceil_div64(ceil_div64(k, S::vec), 4) * 4;
    const int64_t block_a = a.layout == CUTLASS_RS_GROUPED_CONTIGUOUS ? first_row / 128 + g
                                                                      : g * ceil_div64(a.rows, 128);
    out.sfa[g] = static_cast<const SF *>(a.scale_a) + block_a * 128 * cols;
    out.sfb[g] = static_cast<const SF *>(a.scale_b) + g * ceil_div64(n, 128) * 128 * cols;
    const auto shape = cute::make_shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1);
    reinterpret_cast<typename S::LayoutSFA *>(out.layout_sfa)[g] = S::Config::tile_atom_to_shape_SFA(shape);
    reinterpret_cast<typename S::LayoutSFB *>(out.layout_sfb)[g] = S::Config::tile_atom_to_shape_SFB(shape);
  } else if constexpr (A::Scales::enabled) {
    // K-major scales (Scales::m is 1: one scale row per row of A).
    using S = typename A::Scales;
    static_assert(S::m == 1, "grouped blockwise kernels take one scale per row of A");
    const int64_t kb = (k + S::k - 1) / S::k;
    const int64_t nb = (n + S::n - 1) / S::n;
    out.sfa[g] = static_cast<const float *>(a.scale_a) + first_row * kb;
    out.sfb[g] = static_cast<const float *>(a.scale_b) + g * nb * kb;
    const auto shape = cute::make_shape(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1);
    reinterpret_cast<typename S::LayoutSFA *>(out.layout_sfa)[g] = S::Config::tile_atom_to_shape_SFA(shape);
    reinterpret_cast<typename S::LayoutSFB *>(out.layout_sfb)[g] = S::Config::tile_atom_to_shape_SFB(shape);
  }
}

inline bool fits(const cutlass_rs_grouped_args *a) {
  return a->groups >= 1 && fits_int(a->rows) && fits_int(a->n) && fits_int(a->k);
}

template <class Scales>
inline int check_pointers(const cutlass_rs_grouped_args *a) noexcept {
  if (a == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  if constexpr (Scales::enabled) {
    if (a->layout == CUTLASS_RS_GROUPED_LIST) return CUTLASS_RS_ERROR_INVALID;
    if (a->scale_a == nullptr || a->scale_b == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
  }
  switch (a->layout) {
    case CUTLASS_RS_GROUPED_CONTIGUOUS:
    case CUTLASS_RS_GROUPED_MASKED:
      if (a->a == nullptr || a->b == nullptr || a->c == nullptr || a->d == nullptr || a->group_rows == nullptr)
        return CUTLASS_RS_ERROR_NULL_ARGUMENT;
      break;
    case CUTLASS_RS_GROUPED_LIST:
      if (a->problems == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
      break;
    default:
      return CUTLASS_RS_ERROR_INVALID;
  }
  if (!fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
  return CUTLASS_RS_OK;
}

// CUTLASS's arguments over the arrays (extents on the device only: the group scheduler then sizes
// its persistent grid by the SM count).
template <class Gemm>
typename Gemm::Arguments make_arguments(const cutlass_rs_grouped_args *a, const Arrays<Gemm> &arr) {
  typename Gemm::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
  args.problem_shape = {static_cast<int>(a->groups), arr.shapes, nullptr};
  args.mainloop.ptr_A = arr.a;
  args.mainloop.dA = arr.da;
  args.mainloop.ptr_B = arr.b;
  args.mainloop.dB = arr.db;
  if constexpr (Arrays<Gemm>::Scales::enabled) {
    using S = typename Arrays<Gemm>::Scales;
    args.mainloop.ptr_SFA = arr.sfa;
    args.mainloop.layout_SFA = reinterpret_cast<typename S::LayoutSFA *>(arr.layout_sfa);
    args.mainloop.ptr_SFB = arr.sfb;
    args.mainloop.layout_SFB = reinterpret_cast<typename S::LayoutSFB *>(arr.layout_sfb);
  }
  auto &fusion = args.epilogue.thread;
  fusion.alpha = 1.0f;
  fusion.beta = a->beta;
  fusion.alpha_ptr = arr.alpha;
  fusion.beta_ptr = nullptr;
  fusion.alpha_ptr_array = nullptr;
  fusion.beta_ptr_array = nullptr;
  fusion.dAlpha = {cute::_0{}, cute::_0{}, 1};
  fusion.dBeta = {cute::_0{}, cute::_0{}, 0};
  args.epilogue.ptr_C = arr.c;
  args.epilogue.dC = arr.dc;
  args.epilogue.ptr_D = arr.d;
  args.epilogue.dD = arr.dd;
  args.hw_info.device_id = a->device_id;
  args.hw_info.sm_count = a->sm_count;
  return args;
}

// Workspace bytes for a problem: the arrays, and CUTLASS's workspace, which depends on the group
// count and the SM count only (extents live on the device).
template <class Gemm>
int workspace_bytes(const cutlass_rs_grouped_args *a, size_t *bytes) {
  Arrays<Gemm> probe = Arrays<Gemm>::carve(nullptr, a->groups);
  auto args = make_arguments<Gemm>(a, probe);
  *bytes = Arrays<Gemm>::bytes(a->groups) + Gemm::get_workspace_size(args);
  return CUTLASS_RS_OK;
}

template <class Gemm>
int can_implement(const cutlass_rs_grouped_args *a) noexcept {
  try {
    int status = check_pointers<typename Arrays<Gemm>::Scales>(a);
    if (status != CUTLASS_RS_OK) return status;
    Arrays<Gemm> probe = Arrays<Gemm>::carve(nullptr, a->groups);
    return static_cast<int>(Gemm::can_implement(make_arguments<Gemm>(a, probe)));
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

template <class Gemm>
int workspace_size(const cutlass_rs_grouped_args *a, size_t *bytes) noexcept {
  try {
    if (a == nullptr || bytes == nullptr) return CUTLASS_RS_ERROR_NULL_ARGUMENT;
    if (!fits(a)) return CUTLASS_RS_ERROR_INVALID_PROBLEM;
    return workspace_bytes<Gemm>(a, bytes);
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

// What run() checks and builds before its launches; the launch state when `state` is given.
template <class Gemm>
int build(const cutlass_rs_grouped_args *a, void *workspace, size_t workspace_size, LaunchState<Gemm> *state) {
  using Kernel = typename Gemm::GemmKernel;
  if (workspace == nullptr) return CUTLASS_RS_ERROR_WORKSPACE_NULL;
  size_t needed = 0;
  int status = workspace_bytes<Gemm>(a, &needed);
  if (status != CUTLASS_RS_OK) return status;
  if (needed > workspace_size) return CUTLASS_RS_ERROR_WORKSPACE_TOO_SMALL;
  Arrays<Gemm> arr = Arrays<Gemm>::carve(workspace, a->groups);
  auto args = make_arguments<Gemm>(a, arr);
  cutlass::Status st = Gemm::can_implement(args);
  if (st != cutlass::Status::kSuccess) return static_cast<int>(st);
  auto params = Kernel::to_underlying_arguments(args, arr.cutlass_workspace);
  if (state != nullptr) {
    state->valid = false;
    state->params = params;
    state->args = args;
    state->grid = Kernel::get_grid_shape(state->params);
    state->block = Kernel::get_block_shape();
    state->key = cutlass_rs_gemm_args{};  // launch_flags 0: no programmatic dependent launch
    state->workspace = arr.cutlass_workspace;
    state->valid = true;
  }
  return CUTLASS_RS_OK;
}

template <class Gemm>
int prepare(const cutlass_rs_grouped_args *a, void *workspace, size_t workspace_size) noexcept {
  try {
    int status = check_pointers<typename Arrays<Gemm>::Scales>(a);
    if (status != CUTLASS_RS_OK) return status;
    status = build<Gemm>(a, workspace, workspace_size, nullptr);
    if (status != CUTLASS_RS_OK) return status;
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
    return CUTLASS_RS_OK;
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

// The launch state of this thread's last run() of a kernel on a device, with the grouped arguments
// and workspace it was built from (reused while both are the same).
template <class Gemm>
struct GroupedState {
  cutlass_rs_grouped_args key{};
  void *workspace = nullptr;
  LaunchState<Gemm> launch;
};

template <class Gemm>
GroupedState<Gemm> &grouped_state(int device) {
  thread_local std::unique_ptr<GroupedState<Gemm>> states[kLaunchSlots];
  std::unique_ptr<GroupedState<Gemm>> &slot = states[static_cast<unsigned>(device) % kLaunchSlots];
  if (!slot) slot = std::make_unique<GroupedState<Gemm>>();
  return *slot;
}

static_assert(offsetof(cutlass_rs_grouped_args, reserved) + sizeof(int32_t) == sizeof(cutlass_rs_grouped_args),
              "no trailing padding: compared bytewise");

template <class Gemm>
int run(const cutlass_rs_grouped_args *a, void *workspace, size_t workspace_size, void *stream) noexcept {
  try {
    using Kernel = typename Gemm::GemmKernel;
    int status = check_pointers<typename Arrays<Gemm>::Scales>(a);
    if (status != CUTLASS_RS_OK) return status;
    status = check_current_device(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    GroupedState<Gemm> &s = grouped_state<Gemm>(a->device_id);
    const bool hit = s.launch.valid && s.workspace == workspace &&
                     std::memcmp(&s.key, a, sizeof(cutlass_rs_grouped_args)) == 0;
    if (!hit) {
      s.launch.valid = false;
      status = build<Gemm>(a, workspace, workspace_size, &s.launch);
      if (status != CUTLASS_RS_OK) return status;
      s.key = *a;
      s.workspace = workspace;
      cutlass_rs_note_launch_state_build();
    }
    status = ensure_function_attributes<Kernel>(a->device_id);
    if (status != CUTLASS_RS_OK) return status;
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    Arrays<Gemm> arr = Arrays<Gemm>::carve(workspace, a->groups);
    const unsigned threads = 128;
    const unsigned blocks = static_cast<unsigned>((a->groups + threads - 1) / threads);
    build_groups<Arrays<Gemm>><<<blocks, threads, 0, st>>>(*a, arr);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return CUTLASS_RS_ERROR_CUDA_BASE + static_cast<int>(e);
    return launch_status(s.launch, st);
  } catch (...) {
    return CUTLASS_RS_ERROR_EXCEPTION;
  }
}

}  // namespace grouped
}  // namespace cutlass_rs

// Defines the four extern "C" entry points of one grouped kernel over its Gemm type.
#define CUTLASS_RS_DEFINE_GROUPED_ENTRY_POINTS(NAME, GEMM)                                          \
  extern "C" int NAME##_can_implement(const cutlass_rs_grouped_args *args) {                       \
    return cutlass_rs::grouped::can_implement<GEMM>(args);                                         \
  }                                                                                                \
  extern "C" int NAME##_workspace_size(const cutlass_rs_grouped_args *args, size_t *bytes) {       \
    return cutlass_rs::grouped::workspace_size<GEMM>(args, bytes);                                 \
  }                                                                                                \
  extern "C" int NAME##_run(const cutlass_rs_grouped_args *args, void *workspace,                  \
                            size_t workspace_bytes, void *stream) {                                \
    return cutlass_rs::grouped::run<GEMM>(args, workspace, workspace_bytes, stream);               \
  }                                                                                                \
  extern "C" int NAME##_prepare(const cutlass_rs_grouped_args *args, void *workspace,              \
                                size_t workspace_bytes) {                                          \
    return cutlass_rs::grouped::prepare<GEMM>(args, workspace, workspace_bytes);                   \
  }
