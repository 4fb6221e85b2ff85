// Part of cutlass-kernels (kernels/templates/cutlass_rs_sm90_fp8_blockwise.hpp); not generated,
// copied next to the generated sources and included by the kernels of the blockwise `_fp8_overlap`
// schedule only (their objects are cached by their source plus this file).
//
// CUTLASS's SM90 FP8 blockwise-scaled mainloop (`MainloopSm90TmaGmmaWarpSpecializedBlockwiseFP8`)
// with the scaling overlapped with the tensor cores, as cutlass_rs_sm90_fp8.hpp does for the
// tensor-wise mainloop. At the finest scale granularity along K (one scale block per 128-deep
// k-tile, the only one the catalog uses) CUTLASS waits for all wgmmas in flight
// (`warpgroup_wait<0>`) every k-tile before `accum += partial * scale`; here two k-tile
// accumulators (and their scale registers) alternate, so the scaled addition of k-tile t-1 runs
// while the wgmmas of k-tile t do. The products and additions are CUTLASS's, in its order, so the
// results are bit-identical to the CUTLASS kernel of the same tile and cluster.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace cutlass_rs {

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

    Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
    Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});
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

    constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
    Layout warp_group_thread_layout =
        make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
    int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);

    TiledMma tiled_mma;
    auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
    Tensor tCsSFA = tiled_mma.get_slice(thread_idx).partition_C(sSFA);  // (MMA,MMA_M,MMA_N,(MMA_K,PIPE))
    Tensor tCsSFB = tiled_mma.get_slice(thread_idx).partition_C(sSFB);
    Tensor tCsA = thread_mma.partition_A(sA);
    Tensor tCsB = thread_mma.partition_B(sB);
    Tensor tCrA = thread_mma.make_fragment_A(tCsA);
    Tensor tCrB = thread_mma.make_fragment_B(tCsB);
    CUTE_STATIC_ASSERT_V(size<1>(tCsA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCsB) == size<2>(accum));
    CUTE_STATIC_ASSERT_V(size<2>(tCsA) == size<2>(tCsB));

    // Two k-tile accumulators and their scales, alternating.
    Tensor even = make_fragment_like(accum);
    Tensor odd = make_fragment_like(accum);
    Tensor sfa_even = make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{}));
    Tensor sfb_even = make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{}));
    Tensor sfa_odd = make_tensor_like<ElementBlockScale>(tCsSFA(_, _, _, _0{}));
    Tensor sfb_odd = make_tensor_like<ElementBlockScale>(tCsSFB(_, _, _, _0{}));

    auto wait_for_data = [&]() {
      auto token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, token);
    };
    // Reads the k-tile's scales, issues its wgmmas into `part`, combines the scales (as CUTLASS
    // does, while the wgmmas run) and advances the read state.
    auto issue = [&](auto &part, auto &sfa, auto &sfb) {
      int read_stage = smem_pipe_read.index();
      copy(tCsSFA(_, _, _, make_coord(_0{}, read_stage)), sfa);
      copy(tCsSFB(_, _, _, make_coord(_0{}, read_stage)), sfb);
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(part);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, _, k_block, read_stage), tCrB(_, _, k_block, read_stage), part);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(part);
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
      ++smem_pipe_read;
    };
    // accum += part * scale, with GmmaFP8Accumulation's expressions.
    auto promote = [&](auto &part, auto &sfa, auto &sfb) {
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) {
        if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile == 1) {
          accum(i) += part(i) * sfa(_0{});
        } else if constexpr (ScaleMsPerTile > 1 && ScaleNsPerTile == 1) {
          accum(i) += part(i) * sfa(i);
        } else if constexpr (ScaleMsPerTile == 1 && ScaleNsPerTile > 1) {
          accum(i) += part(i) * sfb(i);
        } else {
          accum(i) += part(i) * sfa(i) * sfb(i);
        }
      }
      warpgroup_fence_operand(part);
    };
    PipelineState smem_pipe_release = smem_pipe_read;
    auto retire = [&](auto &part, auto &sfa, auto &sfb) {
      warpgroup_wait<1>();
      promote(part, sfa, sfb);
      pipeline.consumer_release(smem_pipe_release);
      ++smem_pipe_release;
    };

    clear(accum);
    warpgroup_fence_operand(accum);
    if (k_tile_count <= 0) {
      return;
    }
    wait_for_data();
    issue(even, sfa_even, sfb_even);
    --k_tile_count;
    CUTLASS_PRAGMA_NO_UNROLL
    for (; k_tile_count >= 2; k_tile_count -= 2) {
      wait_for_data();
      issue(odd, sfa_odd, sfb_odd);
      retire(even, sfa_even, sfb_even);
      wait_for_data();
      issue(even, sfa_even, sfb_even);
      retire(odd, sfa_odd, sfb_odd);
    }
    if (k_tile_count == 1) {
      wait_for_data();
      issue(odd, sfa_odd, sfb_odd);
      retire(even, sfa_even, sfb_even);
      warpgroup_wait<0>();
      promote(odd, sfa_odd, sfb_odd);
    } else {
      warpgroup_wait<0>();
      promote(even, sfa_even, sfb_even);
    }
    warpgroup_fence_operand(accum);
  }
};

}  // namespace cutlass_rs
