// Part of cutlass-gemm-sys (csrc/cutlass_rs_sm90_fp8.hpp); not generated, copied next to
// the generated sources and included by the kernels of the `_fp8_overlap` schedules only (their
// objects are cached by their source plus this file).
//
// An SM90 FP8 mainloop that promotes like CUTLASS's default and overlaps the promotion with the
// tensor cores.
//
// CUTLASS's f32-promoting FP8 mainloop (`MainloopSm90TmaGmmaWarpSpecializedFP8`, with
// `GmmaFP8Accumulation`) accumulates each k-tile's wgmmas in a temporary accumulator and adds it
// to the f32 accumulator every `mma_promotion_interval` wgmmas (4 by default: once per 128-deep
// k-tile). Before each addition it waits for *all* wgmmas in flight (`warpgroup_wait<0>`), so at
// the default interval the tensor cores idle for the addition and for the issue of the next
// k-tile, every k-tile. Here two temporary accumulators alternate: the wgmmas of k-tile t write one
// while the f32 accumulator takes the other, finished k-tile t-1 (`warpgroup_wait<1>`). The
// additions are the same, in the same order, as CUTLASS's at its default interval of one k-tile,
// so the results are bit-identical to the CUTLASS kernel of the same tile and cluster; the price is
// one more accumulator's registers (3 x 64 f32 per thread at 128x128 cooperative or 64x128
// pingpong, which fits the consumer warp groups' 232 registers).
//
// Everything but `mma` (arguments, TMA loads, pipeline, `mma_tail`) is CUTLASS's collective's, so
// the kernel it plugs into (`GemmUniversal`, selected by the collective's dispatch policy) is
// CUTLASS's cooperative or pingpong kernel unchanged.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"

namespace cutlass_rs {
namespace detail {

// The A and B operands of one warp group's wgmmas, as CUTLASS's SM90 collectives partition them:
// wgmma descriptors into every pipeline stage of shared memory, (MMA,MMA_M,MMA_K,PIPE) and
// (MMA,MMA_N,MMA_K,PIPE), for the warp group of the consumer thread `thread_idx`.
template <class SmemLayoutA, class SmemLayoutB, class TiledMma, class TensorStorage>
CUTLASS_DEVICE auto warp_group_operands(TiledMma const &tiled_mma, TensorStorage &shared_tensors,
                                        int thread_idx) {
  using namespace cute;
  Tensor sA = make_tensor(make_smem_ptr(shared_tensors.smem_A.data()), SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(shared_tensors.smem_B.data()), SmemLayoutB{});
  constexpr int MmaWarpGroups = size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  Layout warp_group_thread_layout =
      make_layout(Int<MmaWarpGroups>{}, Int<cutlass::NumThreadsPerWarpGroup>{});
  int warp_group_idx = __shfl_sync(0xFFFFFFFF, thread_idx / cutlass::NumThreadsPerWarpGroup, 0);
  auto thread_mma = tiled_mma.get_slice(warp_group_thread_layout(warp_group_idx));
  Tensor tCrA = thread_mma.make_fragment_A(thread_mma.partition_A(sA));
  Tensor tCrB = thread_mma.make_fragment_B(thread_mma.partition_B(sB));
  CUTE_STATIC_ASSERT_V(size<2>(tCrA) == size<2>(tCrB));
  return make_tuple(tCrA, tCrB);
}

// Issues the wgmmas of the k-tile in shared-memory stage `stage` into `part`, starting it from
// zero (ScaleOut::Zero), as CUTLASS's FP8 main loops do at their finest promotion interval.
template <class TiledMma, class FragA, class FragB, class Part>
CUTLASS_DEVICE void issue_k_tile(TiledMma &tiled_mma, FragA &tCrA, FragB &tCrB, int stage, Part &part) {
  using namespace cute;
  tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
  warpgroup_fence_operand(part);
  warpgroup_arrive();
  CUTLASS_PRAGMA_UNROLL
  for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
    cute::gemm(tiled_mma, tCrA(_, _, k_block, stage), tCrB(_, _, k_block, stage), part);
    tiled_mma.accumulate_ = GMMA::ScaleOut::One;
  }
  warpgroup_commit_batch();
  warpgroup_fence_operand(part);
}

// The k-tile loop of both overlapped main loops (this header's and the blockwise one). Two parts
// alternate: `issue(part, stage)` starts the k-tile in shared-memory stage `stage` into one while
// the other, the k-tile before, is finished (warpgroup_wait<1>), added by `promote(part)` and its
// stage handed back to the producer. The last part is added after warpgroup_wait<0>; its stage is
// released by CUTLASS's mma_tail (K_PIPE_MMAS = 1).
template <class Pipeline, class PipelineState, class Part, class Issue, class Promote>
CUTLASS_DEVICE void overlapped_k_tiles(Pipeline &pipeline, PipelineState smem_pipe_read, int k_tile_count,
                                       Part &even, Part &odd, Issue &&issue, Promote &&promote) {
  PipelineState smem_pipe_release = smem_pipe_read;
  auto issue_next = [&](Part &part) {
    auto token = pipeline.consumer_try_wait(smem_pipe_read);
    pipeline.consumer_wait(smem_pipe_read, token);
    issue(part, smem_pipe_read.index());
    ++smem_pipe_read;
  };
  auto retire = [&](Part &part) {
    cute::warpgroup_wait<1>();
    promote(part);
    pipeline.consumer_release(smem_pipe_release);
    ++smem_pipe_release;
  };
  if (k_tile_count <= 0) {
    return;
  }
  issue_next(even);
  --k_tile_count;
  CUTLASS_PRAGMA_NO_UNROLL
  for (; k_tile_count >= 2; k_tile_count -= 2) {
    issue_next(odd);
    retire(even);
    issue_next(even);
    retire(odd);
  }
  if (k_tile_count == 1) {
    issue_next(odd);
    retire(even);
    cute::warpgroup_wait<0>();
    promote(odd);
  } else {
    cute::warpgroup_wait<0>();
    promote(even);
  }
}

}  // namespace detail

template <class Base>
struct Sm90Fp8OverlappedPromotion : Base {
  using typename Base::DispatchPolicy;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using typename Base::TiledMma;

  static_assert(Base::K_PIPE_MMAS == 1, "mma_tail releases one stage after the last k-tile");
  static_assert(cute::size<2>(typename Base::TileShape{}) == 128,
                "promotion once per k-tile equals CUTLASS's default interval (4 wgmmas) only at tile k 128");

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC &accum,
                          int k_tile_count, int thread_idx, TensorStorage &shared_tensors,
                          Params const &) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");

    TiledMma tiled_mma;
    auto operands = detail::warp_group_operands<SmemLayoutA, SmemLayoutB>(tiled_mma, shared_tensors, thread_idx);
    Tensor tCrA = get<0>(operands);  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = get<1>(operands);  // (MMA,MMA_N,MMA_K,PIPE)
    CUTE_STATIC_ASSERT_V(size<1>(tCrA) == size<1>(accum));
    CUTE_STATIC_ASSERT_V(size<1>(tCrB) == size<2>(accum));

    // The two k-tile accumulators; each k-tile starts its own from zero (ScaleOut::Zero).
    Tensor even = make_fragment_like(accum);
    Tensor odd = make_fragment_like(accum);

    // Adds a finished k-tile to the f32 accumulator.
    auto promote = [&](auto &part) {
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(accum); ++i) {
        accum(i) += part(i);
      }
      warpgroup_fence_operand(part);
    };
    clear(accum);
    warpgroup_fence_operand(accum);
    detail::overlapped_k_tiles(
        pipeline, smem_pipe_read, k_tile_count, even, odd,
        [&](auto &part, int stage) { detail::issue_k_tile(tiled_mma, tCrA, tCrB, stage, part); },
        promote);
    warpgroup_fence_operand(accum);
  }
};

}  // namespace cutlass_rs
