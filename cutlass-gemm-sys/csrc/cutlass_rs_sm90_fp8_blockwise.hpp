// Part of cutlass-gemm-sys (csrc/cutlass_rs_sm90_fp8_blockwise.hpp); not generated,
// copied next to the generated sources and included by the kernels of the blockwise `_fp8_overlap`
// schedule only (their objects are cached by their source plus this file and
// cutlass_rs_sm90_fp8.hpp, which it includes).
//
// CUTLASS's SM90 FP8 blockwise-scaled mainloop (`MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8`)
// with the scaling overlapped with the tensor cores, as cutlass_rs_sm90_fp8.hpp does for the
// tensor-wise mainloop (whose k-tile loop and wgmma issue it shares). At the finest scale granularity along K (one scale block per 128-deep
// k-tile, the only one the catalog uses) CUTLASS waits for all wgmmas in flight
// (`warpgroup_wait<0>`) every k-tile before `accum += partial * scale`; here two k-tile
// accumulators (and their scale registers) alternate, so the scaled addition of k-tile t-1 runs
// while the wgmmas of k-tile t do. The products and additions are CUTLASS's, in its order, so the
// results are bit-identical to the CUTLASS kernel of the same tile and cluster.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass_rs_sm90_fp8.hpp"

namespace cutlass_rs {
namespace detail {

// One k-tile's accumulator and the scales it is added with.
template <class Acc, class ScaleA, class ScaleB>
struct ScaledPart {
  Acc acc;
  ScaleA sfa;
  ScaleB sfb;
};

}  // namespace detail

template <class Base>
struct Sm90Fp8BlockwiseOverlappedPromotion : Base {
  using typename Base::DispatchPolicy;
  using typename Base::ElementBlockScale;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::SmemLayoutSFA;
  using typename Base::SmemLayoutSFB;
  using typename Base::TensorStorage;
  using typename Base::TileShape;
  using typename Base::TiledMma;
  static constexpr int ScaleMsPerTile = Base::ScaleMsPerTile;
  static constexpr int ScaleNsPerTile = Base::ScaleNsPerTile;

  static_assert(Base::K_PIPE_MMAS == 1, "mma_tail releases one stage after the last k-tile");
  static_assert(Base::ScaleGranularityK == cute::size<2>(TileShape{}),
                "one scale block per k-tile (CUTLASS's finest granularity) only");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC &accum,
                          int k_tile_count, int thread_idx, TensorStorage &shared_tensors,
                          Params const &) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");

    // The scales of a k-tile broadcast over the tile's other mode, as in CUTLASS's mma().
    Tensor sSFA = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFA.data()),
        make_layout(make_shape(get<0>(shape(SmemLayoutSFA{})), get<1>(TileShape{}),
                               make_shape(get<1>(shape(SmemLayoutSFA{})), get<2>(shape(SmemLayoutSFA{})))),
                    make_stride(get<0>(stride(SmemLayoutSFA{})), _0{},
                                make_stride(get<1>(stride(SmemLayoutSFA{})), get<2>(stride(SmemLayoutSFA{}))))));
    Tensor sSFB = make_tensor(
        make_smem_ptr(shared_tensors.smem_SFB.data()),
        make_layout(make_shape(get<0>(TileShape{}), get<0>(shape(SmemLayoutSFB{})),
                               make_shape(get<1>(shape(SmemLayoutSFB{})), get<2>(shape(SmemLayoutSFB{})))),
                    make_stride(_0{}, get<0>(stride(SmemLayoutSFB{})),
                                make_stride(get<1>(stride(SmemLayoutSFB{})), get<2>(stride(SmemLayoutSFB{}))))));

    TiledMma tiled_mma;
    Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA);  // (MMA,MMA_M,MMA_N,(MMA_K,PIPE))
    Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
    auto operands = detail::warp_group_operands<SmemLayoutA, SmemLayoutB>(tiled_mma, shared_tensors, thread_idx);
    Tensor tCrA = get<0>(operands);  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = get<1>(operands);  // (MMA,MMA_N,MMA_K,PIPE)
    CUTE_STATIC_ASSERT_V(size<1>(tCrA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCrB) == size<2>(accum));

    // Two k-tile accumulators and their scales, alternating.
    using Part = detail::ScaledPart<decltype(make_fragment_like(accum)),
                                    decltype(make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{}))),
                                    decltype(make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{})))>;
    Part even{make_fragment_like(accum), make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{})),
              make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{}))};
    Part odd{make_fragment_like(accum), make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{})),
             make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{}))};

    // Reads the k-tile's scales, issues its wgmmas and combines the scales (as CUTLASS does,
    // while the wgmmas run).
    auto issue = [&](Part &part, int stage) {
      auto &sfa = part.sfa;
      auto &sfb = part.sfb;
      copy(tCsSFA(_, _, _, make_coord(_0{}, stage)), sfa);
      copy(tCsSFB(_, _, _, make_coord(_0{}, stage)), sfb);
      detail::issue_k_tile(tiled_mma, tCrA, tCrB, stage, part.acc);
      if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile == 1) {
        sfa(_0{}) = sfa(_0{}) * sfb(_0{});
      }
      if constexpr (ScaleMsPerTile > 1 && ScaleNsPerTile == 1) {
        ElementBlockScale scale_b = sfb(_0{});
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(filter_zeros(sfa)); i++) {
          filter_zeros(sfa)(i) = filter_zeros(sfa)(i) * scale_b;
        }
      }
      if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile > 1) {
        ElementBlockScale scale_a = sfa(_0{});
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < size(filter_zeros(sfb)); i++) {
          filter_zeros(sfb)(i) = filter_zeros(sfb)(i) * scale_a;
        }
      }
    };
    // accum += part * scale, with GmmaFP8Accumulation's expressions.
    auto promote = [&](Part &part) {
      warpgroup_fence_operand(part.acc);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) {
        if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile == 1) {
          accum(i) += part.acc(i) * part.sfa(_0{});
        } else if constexpr (ScaleMsPerTile > 1 && ScaleNsPerTile == 1) {
          accum(i) += part.acc(i) * part.sfa(i);
        } else if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile > 1) {
          accum(i) += part.acc(i) * part.sfb(i);
        } else {
          accum(i) += part.acc(i) * part.sfa(i) * part.sfb(i);
        }
      }
      warpgroup_fence_operand(part.acc);
    };
    clear(accum);
    warpgroup_fence_operand(accum);
    detail::overlapped_k_tiles(pipeline, smem_pipe_read, k_tile_count, even, odd, issue, promote);
    warpgroup_fence_operand(accum);
  }
};

}  // namespace cutlass_rs
