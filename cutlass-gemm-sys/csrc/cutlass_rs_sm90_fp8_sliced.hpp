// Part of cutlass-gemm-sys (csrc/cutlass_rs_sm90_fp8_sliced.hpp); not generated,
// copied next to the generated sources and included by the cooperative `_fp8_overlap` kernels
// whose tile is too wide for cutlass_rs_sm90_fp8.hpp's three accumulators (tile N > 144; their
// objects are cached by their source plus this file and cutlass_rs_sm90_fp8.hpp, which it
// includes for the operand partitioning).
//
// An SM90 FP8 cooperative mainloop for wide tiles that promotes like CUTLASS's default (once per
// 128-deep k-tile) with the f32 accumulator plus half of it.
//
// At 128x256 each of the two consumer warp groups holds a 64x256 f32 accumulator (128 registers a
// thread); CUTLASS's f32-promoting mainloop adds a second, full-size k-tile accumulator (256
// registers, past the 232 a consumer warp group has: CUTLASS's 128x256 promoting kernels spill and
// ran at 0.10-0.53x cuBLASLt), and the overlap of cutlass_rs_sm90_fp8.hpp a third. Here each
// k-tile is issued in N slices narrow enough that the f32 accumulator plus one slice's k-tile
// accumulator fit (128 + 64 registers at 128x256: two 64x128 slices a warp group; 128x192 takes
// one 96 + 96), and each slice is added as soon as its wgmmas finish; the other warp group's
// wgmmas keep the tensor cores busy meanwhile.
//
// Measured on an H100 (e4m3 -> bf16, the M = 4096 shapes of bench/shapes.tsv,
// docs/performance.md): 128x256 runs at 0.95-1.01x cuBLASLt where N is a multiple of 256 (the
// 128x128 overlapped kernel 0.92-1.01x in the same batch). Two variants measured and dropped: two
// alternating slice accumulators (64-wide slices at 128x256, so the addition overlaps the next
// slice's wgmmas) ran at 0.69-0.80x, the narrow wgmmas reading A from shared memory four times
// per k-tile; and the warp groups taking turns to issue (named barriers) ran about 2 % slower
// than leaving them free.
//
// Per element of D the additions are CUTLASS's: each k-tile's four wgmmas start from zero and the
// k-tile's sum is added to the f32 accumulator, k-tile by k-tile. Slicing N only changes which
// wgmma instruction computes an element, so the results equal those of the 128x128 overlapped
// kernel bit for bit (cutlass-gemm/tests/gpu/fp8.rs checks it on the GPU).
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass_rs_sm90_fp8.hpp"

namespace cutlass_rs {

template <class Base>
struct Sm90Fp8SlicedPromotion : Base {
  using typename Base::DispatchPolicy;
  using typename Base::MainloopPipeline;
  using typename Base::Params;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutA;
  using typename Base::SmemLayoutB;
  using typename Base::TensorStorage;
  using typename Base::TileShape;
  using typename Base::TiledMma;

  static constexpr int TileM = cute::size<0>(TileShape{});
  static constexpr int TileN = cute::size<1>(TileShape{});
  static constexpr int TileK = cute::size<2>(TileShape{});
  static constexpr int WarpGroups = cute::size(TiledMma{}) / cutlass::NumThreadsPerWarpGroup;
  // The f32 accumulator's registers a thread: (TileM / WarpGroups) * TileN / 128.
  static constexpr int AccRegs = TileM / WarpGroups * TileN / cutlass::NumThreadsPerWarpGroup;
  // The fewest slices whose k-tile accumulator fits beside the f32 one in 200 registers (the
  // rest of the consumer warp group's 232 is addresses, descriptors and the epilogue's).
  static constexpr int Slices = AccRegs + AccRegs <= 200 ? 1 : 2;
  static constexpr int SliceN = TileN / Slices;

  static_assert(Base::K_PIPE_MMAS == 1, "mma_tail releases one stage after the last k-tile");
  static_assert(TileK == 128,
                "promotion once per k-tile equals CUTLASS's default interval (4 wgmmas) only at tile k 128");
  static_assert(WarpGroups == 2, "the cooperative kernel's two consumer warp groups, one m64 row of atoms each");
  static_assert(TileN % Slices == 0 && SliceN % 8 == 0, "slices must be wgmma N shapes");

  // The wgmma of one slice: the builder's atom selection for a SliceN-wide tile, laid out over the
  // warp groups as the builder's cooperative TiledMma is.
  using SliceTiledMma = decltype(cute::make_tiled_mma(
      cute::GMMA::ss_op_selector<typename TiledMma::ValTypeA, typename TiledMma::ValTypeB,
                                 typename TiledMma::ValTypeC,
                                 cute::Shape<cute::Int<TileM>, cute::Int<SliceN>, cute::Int<TileK>>,
                                 cute::GMMA::Major::K, cute::GMMA::Major::K>(),
      cute::Layout<cute::Shape<cute::Int<WarpGroups>, cute::_1, cute::_1>>{}));

  template <class FrgTensorC>
  CUTLASS_DEVICE void mma(MainloopPipeline pipeline, PipelineState smem_pipe_read, FrgTensorC &accum,
                          int k_tile_count, int thread_idx, TensorStorage &shared_tensors,
                          Params const &) {
    using namespace cute;
    static_assert(is_rmem<FrgTensorC>::value, "C tensor must be rmem resident.");

    SliceTiledMma tiled_mma;
    auto operands = detail::warp_group_operands<SmemLayoutA, SmemLayoutB>(tiled_mma, shared_tensors, thread_idx);
    Tensor tCrA = get<0>(operands);  // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCrB = get<1>(operands);  // (MMA,Slices,MMA_K,PIPE)
    CUTE_STATIC_ASSERT_V(size<1>(tCrA) == Int<1>{});
    CUTE_STATIC_ASSERT_V(size<1>(tCrB) == Int<Slices>{});

    // One slice's k-tile accumulator. A wgmma accumulator holds its values N-block by N-block
    // (CuTe's CLayout_64xN: (2,2,N/8), the N/8 mode outermost), so slice s of the warp group's
    // 64 x TileN accumulator is the contiguous run of values [s * size(part), (s + 1) * size(part)).
    Tensor part = partition_fragment_C(tiled_mma, Shape<Int<TileM>, Int<SliceN>>{});
    static_assert(decltype(size(part))::value * Slices == decltype(size(accum))::value,
                  "the slices tile the accumulator");

    // Slice `slice` of the k-tile in shared-memory stage `stage` into `part`, from zero.
    auto issue = [&](int stage, int slice) {
      tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
      warpgroup_fence_operand(part);
      warpgroup_arrive();
      CUTLASS_PRAGMA_UNROLL
      for (int k_block = 0; k_block < size<2>(tCrA); ++k_block) {
        cute::gemm(tiled_mma, tCrA(_, 0, k_block, stage), tCrB(_, slice, k_block, stage), part(_, 0, 0));
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_fence_operand(part);
    };
    // Adds the finished slice to its run of the f32 accumulator.
    auto promote = [&](int slice) {
      warpgroup_fence_operand(part);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < size(part); ++i) {
        accum(slice * size(part) + i) += part(i);
      }
      warpgroup_fence_operand(part);
    };
    clear(accum);
    warpgroup_fence_operand(accum);
    PipelineState smem_pipe_release = smem_pipe_read;
    CUTLASS_PRAGMA_NO_UNROLL
    for (int k_tile = 0; k_tile < k_tile_count; ++k_tile) {
      auto token = pipeline.consumer_try_wait(smem_pipe_read);
      pipeline.consumer_wait(smem_pipe_read, token);
      int stage = smem_pipe_read.index();
      CUTLASS_PRAGMA_UNROLL
      for (int slice = 0; slice < Slices; ++slice) {
        issue(stage, slice);
        warpgroup_wait<0>();
        promote(slice);
      }
      ++smem_pipe_read;
      // The last k-tile's stage is released by CUTLASS's mma_tail (K_PIPE_MMAS = 1).
      if (k_tile + 1 < k_tile_count) {
        pipeline.consumer_release(smem_pipe_release);
        ++smem_pipe_release;
      }
    }
    warpgroup_fence_operand(accum);
  }
};

}  // namespace cutlass_rs
