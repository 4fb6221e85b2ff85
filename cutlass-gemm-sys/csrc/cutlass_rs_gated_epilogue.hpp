// The gated epilogue of the kernels named ..._glu_scale_bias{type}_act (the catalog's
// Fusion::Gated): a gated linear unit (SwiGLU, GeGLU, ReGLU) in the GEMM. Part of cutlass-gemm-sys
// (csrc/); not generated. Included by those kernels' generated sources only, after the shim.
//
// B holds a gate and an up projection interleaved in blocks of 8 columns (columns 16j..16j+7 are
// the gate's 8j..8j+7, columns 16j+8..16j+15 the up projection's), so that every thread of an
// SM90 warpgroup MMA holds a gate value and its up value in registers (the accumulator's value
// mode is (2 columns, 2 rows, N/8 blocks of 8 columns)). With h = alpha * row_scale[m] *
// col_scale[n] * acc + col_bias[n] for each of the GEMM's n columns (the vectors interleaved as B):
//
//   D[m][8j + i] = act(h[m][16j + i]) * h[m][16j + 8 + i],   i < 8
//
// D has half the GEMM's columns. f32 throughout, the activation from cutlass_rs_activation.cuh
// (the unfused twin's). The epilogue stores D straight from registers (two adjacent outputs per
// store), so it runs on the SM90 warp-specialized kernels through CUTLASS's adapter for epilogues
// without shared memory (NoSmemWarpSpecialized); C is not read.
#pragma once

#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/cuda_host_adapter.hpp"
#include "cute/tensor.hpp"

#include "cutlass_rs_activation.cuh"
#include "cutlass_rs_shim.hpp"

namespace cutlass_rs {

// The catalog's Fusion::Gated as a CUTLASS fusion tag: the collective builder below turns it into
// the epilogue. Bias is the element type of the bias vector.
template <class Bias>
struct GatedFusion {};

// The run-time arguments (from the C ABI's, by fused_arguments).
struct GatedArguments {
  // Not named alpha: the shim gives CUTLASS's fusion arguments (those with an alpha) alpha and beta.
  float scalar = 1.0f;               // alpha
  const float *row_scale = nullptr;  // m values, or null (1)
  const float *col_scale = nullptr;  // the GEMM's n values, interleaved as B, or null (1)
  const void *col_bias = nullptr;    // the GEMM's n values of Bias, interleaved as B, or null (0)
  int activation = CUTLASS_RS_ACTIVATION_SILU;
};

template <class ElementD_, class StrideD_, class Bias>
class GatedEpilogue {
 public:
  using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
  using DispatchPolicy = EpilogueSchedule;
  // What GemmUniversalAdapter names EpilogueOutputOp (only a name there).
  using ThreadEpilogueOp = GatedArguments;
  using ElementOutput = ElementD_;
  using ElementAccumulator = float;
  using ElementCompute = float;
  using ElementScalar = float;
  using ElementD = ElementD_;
  using ElementC = ElementD_;  // never read
  using StrideC = StrideD_;
  using StrideD = StrideD_;
  using GmemTiledCopyC = void;
  using GmemTiledCopyD = void;
  static_assert(cute::is_same_v<cute::remove_cvref_t<decltype(cute::get<1>(StrideD{}))>, cute::_1>,
                "the gated epilogue stores a row-major D");

  struct SharedStorage {};
  using TensorStorage = SharedStorage;

  struct Arguments {
    GatedArguments thread{};
    ElementC const *ptr_C = nullptr;
    StrideC dC{};
    ElementD *ptr_D = nullptr;
    StrideD dD{};
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const &, Arguments const &args, void *) {
    return args;
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const &, Arguments const &) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const &, Arguments const &, void *, cudaStream_t,
                                              cutlass::CudaHostAdapter * = nullptr) {
    return cutlass::Status::kSuccess;
  }
  // The GEMM's n is a whole number of 16-column gate/up blocks; D's rows are 4-byte aligned (two
  // outputs per store).
  template <class ProblemShape>
  static bool can_implement(ProblemShape const &problem_shape, Arguments const &args) {
    auto shape = cute::append<4>(problem_shape, 1);
    const auto n = cute::get<1>(shape);
    const bool pairs = (cute::get<0>(args.dD) % 2 == 0) && (cute::get<2>(args.dD) % 2 == 0) &&
                       (reinterpret_cast<uintptr_t>(args.ptr_D) % (2 * sizeof(ElementD)) == 0);
    return n % 16 == 0 && pairs;
  }

  CUTLASS_HOST_DEVICE
  GatedEpilogue(Params const &params_, SharedStorage const & = SharedStorage()) : params(params_) {}

  CUTLASS_DEVICE bool is_source_needed() { return false; }

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl,
                                 cute::Tensor<FrgEngine, FrgLayout> const &accumulators, TiledMma tiled_mma,
                                 ResidueMNK, int thread_idx, char *) {
    using namespace cute;
    static_assert(is_static<BlockShapeMNK>::value, "the tile shape must be static");
    static_assert(size<1>(BlockShapeMNK{}) % 16 == 0, "the tile's N holds whole gate/up blocks");
    // The warpgroup MMA's accumulator: ((2 columns, 2 rows, N/8 blocks), MMA_M, MMA_N).
    static_assert(rank<0>(FrgLayout{}) == 3 && size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2 &&
                      size<0, 2>(FrgLayout{}) % 2 == 0,
                  "the gated epilogue reads SM90 warpgroup MMA accumulators");

    const int64_t M = get<0>(problem_shape_mnkl);
    const int64_t N = get<1>(problem_shape_mnkl);
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    const int64_t m0 = int64_t(m_coord) * size<0>(blk_shape_MNK);
    const int64_t n0 = int64_t(n_coord) * size<1>(blk_shape_MNK);
    if (m0 >= M || n0 >= N) return;

    // Each accumulator's (row, column) in the tile.
    Tensor cD = make_identity_tensor(take<0, 2>(blk_shape_MNK));
    auto thr_mma = tiled_mma.get_thread_slice(thread_idx);
    Tensor tCcD = thr_mma.partition_C(cD);

    const int64_t ldd = get<0>(params.dD);
    ElementD *d = params.ptr_D + int64_t(l_coord) * get<2>(params.dD);
    const GatedArguments &a = params.thread;
    const Bias *bias = static_cast<const Bias *>(a.col_bias);
    // One instantiation of the loop per activation, and per whether any vector is read: a
    // branch per value would multiply the unrolled code (the loop covers the whole tile, as the
    // accumulators are registers) beyond the instruction cache, which measured 20 % slower.
    const bool vectors = a.row_scale != nullptr || a.col_scale != nullptr || bias != nullptr;
    auto store = [&](auto kind, auto with_vectors) {
      constexpr int Kind = decltype(kind)::value;
      constexpr bool Vectors = decltype(with_vectors)::value;
      CUTLASS_PRAGMA_UNROLL
      for (int mm = 0; mm < size<1>(accumulators); ++mm) {
        CUTLASS_PRAGMA_UNROLL
        for (int nn = 0; nn < size<2>(accumulators); ++nn) {
          CUTLASS_PRAGMA_UNROLL
          for (int r = 0; r < 2; ++r) {
            auto at = make_coord(make_coord(0, r, 0), mm, nn);
            const int64_t m = m0 + get<0>(tCcD(at));
            if (m >= M) continue;
            const float rs =
                a.scalar * (Vectors && a.row_scale != nullptr ? __ldg(a.row_scale + m) : 1.0f);
            ElementD *line = d + m * ldd;
            CUTLASS_PRAGMA_UNROLL
            for (int b = 0; b < size<0, 2>(accumulators); b += 2) {
              auto gate_at = make_coord(make_coord(0, r, b), mm, nn);
              auto up_at = make_coord(make_coord(0, r, b + 1), mm, nn);
              const int64_t n = n0 + get<1>(tCcD(gate_at));
              // Folded away at compile time: the up value is 8 columns right of its gate value.
              if (get<1>(tCcD(up_at)) != get<1>(tCcD(gate_at)) + 8 ||
                  get<0>(tCcD(up_at)) != get<0>(tCcD(gate_at)) ||
                  get<1>(tCcD(make_coord(make_coord(1, r, b), mm, nn))) != get<1>(tCcD(gate_at)) + 1) {
                __trap();
              }
              if (n >= N) continue;
              cutlass::Array<ElementD, 2> out;
              CUTLASS_PRAGMA_UNROLL
              for (int i = 0; i < 2; ++i) {
                float g = rs * accumulators(make_coord(make_coord(i, r, b), mm, nn));
                float u = rs * accumulators(make_coord(make_coord(i, r, b + 1), mm, nn));
                if (Vectors && a.col_scale != nullptr) {
                  g *= __ldg(a.col_scale + n + i);
                  u *= __ldg(a.col_scale + n + 8 + i);
                }
                if (Vectors && bias != nullptr) {
                  g += static_cast<float>(bias[n + i]);
                  u += static_cast<float>(bias[n + 8 + i]);
                }
                out[i] = static_cast<ElementD>(activate_as<Kind>(g) * u);
              }
              // Output column of the gate's column n (n % 16 < 8, even).
              const int64_t j = (n / 16) * 8 + n % 16;
              *reinterpret_cast<cutlass::Array<ElementD, 2> *>(line + j) = out;
            }
          }
        }
      }
    };
    with_activation(a.activation, [&](auto kind) {
      if (vectors) {
        store(kind, std::true_type{});
      } else {
        store(kind, std::false_type{});
      }
    });
  }

 private:
  Params params;
};

// The run-time arguments from the C ABI's: for gated kernels n is the GEMM's (B's columns, gate
// and up interleaved), D has n / 2 columns; beta and C are not used.
template <>
inline GatedArguments fused_arguments<GatedArguments>(const cutlass_rs_gemm_args *a) {
  return GatedArguments{a->alpha, a->row_scale, a->col_scale, a->col_bias, a->activation};
}

}  // namespace cutlass_rs

namespace cutlass::epilogue::collective {

// The collective builder for the gated fusion tag: the epilogue above on the SM90 warp-specialized
// kernels, through CUTLASS's adapter for epilogues without shared memory.
template <class OpClass, class TileShape_MNK, class ClusterShape_MNK, class EpilogueTileType,
          class ElementAccumulator, class ElementCompute, class ElementC_, class GmemLayoutTagC_, int AlignmentC,
          class ElementD, class GmemLayoutTagD, int AlignmentD, class Bias>
struct CollectiveBuilder<arch::Sm90, OpClass, TileShape_MNK, ClusterShape_MNK, EpilogueTileType, ElementAccumulator,
                         ElementCompute, ElementC_, GmemLayoutTagC_, AlignmentC, ElementD, GmemLayoutTagD, AlignmentD,
                         NoSmemWarpSpecialized, cutlass_rs::GatedFusion<Bias>, void> {
  static_assert(cute::is_same_v<ElementAccumulator, float> && cute::is_same_v<ElementCompute, float>,
                "the gated epilogue computes in f32");
  using CollectiveOp = detail::Sm90TmaWarpSpecializedAdapter<
      cutlass_rs::GatedEpilogue<ElementD, cutlass::detail::TagToStrideC_t<GmemLayoutTagD>, Bias>>;
};

}  // namespace cutlass::epilogue::collective
